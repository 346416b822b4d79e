//! Every response decoder of bizmsg on whatever bytes libFuzzer makes up (see
//! `bizmsg::fuzzing::decode_everything` for what must hold).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bizmsg::fuzzing::decode_everything(data);
});
