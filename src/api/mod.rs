//! The service's operations, one file per endpoint group. Each builds its request, sends it
//! through the client's attempt loop and decodes the answer into wire models.

mod business_accounts;
mod business_phone_numbers;
mod directory;
mod listing;
mod messages;
mod pages;
mod shared_single_send;

pub use directory::{Account, Directory};
pub use listing::{PageRequest, Pager, UnreadPage};
pub(crate) use messages::encode;
pub use messages::{idempotency_key, validate_template, SendMessage};
pub use pages::{PageStream, TaskScope};
