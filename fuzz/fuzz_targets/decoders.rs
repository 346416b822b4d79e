//! Every response decoder of bizmsg on whatever bytes libFuzzer makes up (see
//! `bizmsg::wire::fuzz::decode_everything` for what must hold).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bizmsg::wire::fuzz::decode_everything(data);
});
