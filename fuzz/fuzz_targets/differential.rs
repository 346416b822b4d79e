//! bizmsg's HTTP/1.1 reading against hyper's client on answers libFuzzer makes up: the first
//! byte is how many bytes the server writes at a time, the rest the answer (see
//! `bizmsg::fuzzing::read_alike` for what must hold).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bizmsg::fuzzing::read_alike(data);
});
