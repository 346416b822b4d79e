//! The paths of the service's three endpoints, as the sandbox serves them. A leaf: the router
//! (`routes.rs`) serves them and the request log (`log.rs`) tells sends apart by them.

pub(crate) const SEND_PATH: &str = "/v1/chat/messages/send";
pub(crate) const ACCOUNTS_PATH: &str = "/v1/chat/businessAccounts";
pub(crate) const NUMBERS_PATH: &str = "/v1/chat/businessPhoneNumber";
