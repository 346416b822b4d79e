//! When a request reached the sandbox: on Linux, the kernel's receive time of the bytes the
//! connection task read last (`SO_TIMESTAMP`), not the moment the task got to read them.
//!
//! Why: a sender's busiest second is counted by arrival (`traffic.rs`), as the platform counts
//! it. The sandbox shares its cores with the client under test, and its task can read a request
//! milliseconds after it arrived: at 5,000 a second it counted 5,001–5,026 in its busiest
//! second while a capture of the same runs by the kernel's times (tcpdump) never held more than
//! 5,000, and on a loaded machine 201 at a pace of 200. Elsewhere (and should the kernel give
//! no time) a read's own moment stands in.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use crate::sync::lock;

/// The arrival of the bytes a connection read last, shared by its stream and its requests.
#[derive(Clone, Default)]
pub(crate) struct Arrivals(Arc<Mutex<Option<Instant>>>);

impl Arrivals {
    /// When the bytes read last arrived; `None` before the first read.
    pub(crate) fn latest(&self) -> Option<Instant> {
        *lock(&self.0)
    }

    fn record(&self, arrived: Instant) {
        *lock(&self.0) = Some(arrived);
    }
}

/// A request's arrival, put into its extensions by the connection task.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arrived(pub(crate) Instant);

/// Asks the kernel to time what the connections `listener` accepts receive (they inherit it).
/// Done when the sandbox binds: Linux turns receive times on a moment after the first socket
/// asks (a worker of its own does it), and the first requests would come before.
pub(crate) fn time_arrivals_on(listener: &TcpListener) {
    #[cfg(target_os = "linux")]
    if let Err(error) = kernel::ask_for_receive_times(listener) {
        ::log::debug!("sandbox: no kernel receive times ({error})");
    }
    #[cfg(not(target_os = "linux"))]
    let _ = listener;
}

/// A connection's stream that records when what it reads arrived.
pub(crate) struct ArrivalStream {
    inner: TcpStream,
    arrivals: Arrivals,
}

impl ArrivalStream {
    /// Asks the kernel to time what `inner` receives from now on, should its listener not have
    /// (best effort: without it, a read's own moment stands in).
    pub(crate) fn new(inner: TcpStream) -> (Self, Arrivals) {
        #[cfg(target_os = "linux")]
        if let Err(error) = kernel::ask_for_receive_times(&inner) {
            ::log::debug!("sandbox: no kernel receive times on a connection ({error})");
        }
        let arrivals = Arrivals::default();
        (
            ArrivalStream {
                inner,
                arrivals: arrivals.clone(),
            },
            arrivals,
        )
    }

    /// The socket, for a look at what it received (`peek`) that takes nothing.
    pub(crate) fn get_ref(&self) -> &TcpStream {
        &self.inner
    }
}

impl AsyncRead for ArrivalStream {
    #[cfg(target_os = "linux")]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            std::task::ready!(this.inner.poll_read_ready(cx))?;
            // SAFETY: the kernel only writes into these bytes (never reads them), and only the
            // `read` it wrote are marked initialised below.
            let unfilled = unsafe { buf.unfilled_mut() };
            let received = this.inner.try_io(tokio::io::Interest::READABLE, || {
                kernel::receive(&this.inner, unfilled)
            });
            match received {
                Ok((read, arrived)) => {
                    if read > 0 {
                        this.arrivals.record(
                            arrived
                                .and_then(kernel::as_instant)
                                .unwrap_or_else(Instant::now),
                        );
                    }
                    // SAFETY: recvmsg wrote `read` bytes at the start of `unfilled`.
                    unsafe { buf.assume_init(read) };
                    buf.advance(read);
                    return Poll::Ready(Ok(()));
                }
                // Readiness was stale: tokio cleared it, wait for the next.
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        std::task::ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        if buf.filled().len() > before {
            this.arrivals.record(Instant::now());
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for ArrivalStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Linux's receive times: `SO_TIMESTAMP` on the socket, `recvmsg` with room for the
/// `SCM_TIMESTAMP` the kernel adds (the time the last bytes read were received).
#[cfg(target_os = "linux")]
mod kernel {
    use std::io;
    use std::mem::MaybeUninit;
    use std::os::fd::AsRawFd;
    use std::time::{Duration, Instant, SystemTime};

    use tokio::net::TcpStream;

    /// A receive time further back than this is not believed (the wall clock was set): the
    /// read's own moment stands in.
    const OLDEST: Duration = Duration::from_secs(60);

    pub(super) fn ask_for_receive_times(socket: &impl AsRawFd) -> io::Result<()> {
        let on: libc::c_int = 1;
        // SAFETY: a valid socket descriptor (borrowed from `socket`), an option of the size
        // the kernel reads (an int).
        let done = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMP,
                std::ptr::from_ref(&on).cast(),
                libc::socklen_t::try_from(size_of::<libc::c_int>()).unwrap_or(4),
            )
        };
        if done == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Reads into `into` without waiting; the bytes read and, when the kernel gave it, their
    /// receive time (for TCP, that of the last bytes read).
    pub(super) fn receive(
        stream: &TcpStream,
        into: &mut [MaybeUninit<u8>],
    ) -> io::Result<(usize, Option<SystemTime>)> {
        let mut iov = libc::iovec {
            iov_base: into.as_mut_ptr().cast(),
            iov_len: into.len(),
        };
        // Room for one control message holding a timeval, aligned for cmsghdr (8 bytes).
        let mut control = [0u64; 8];
        // SAFETY: msghdr is plain data, all zeroes is its empty value.
        let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
        header.msg_iov = &raw mut iov;
        header.msg_iovlen = 1;
        header.msg_control = control.as_mut_ptr().cast();
        header.msg_controllen = size_of_val(&control) as _;
        // SAFETY: the iovec points at `into` (its length), the control buffer at `control`
        // (its length); both outlive the call.
        let read =
            unsafe { libc::recvmsg(stream.as_raw_fd(), &raw mut header, libc::MSG_DONTWAIT) };
        let Ok(read) = usize::try_from(read) else {
            return Err(io::Error::last_os_error());
        };
        // A control part cut short (no room for it) is not read.
        if header.msg_flags & libc::MSG_CTRUNC != 0 {
            return Ok((read, None));
        }
        let mut received = None;
        let timeval_bytes = u32::try_from(size_of::<libc::timeval>()).unwrap_or(u32::MAX);
        // SAFETY: the CMSG_* walk stays within the control buffer the kernel filled and
        // described in `header`; a timeval is read (unaligned) only from a message long
        // enough to hold one.
        unsafe {
            let long_enough = u64::from(libc::CMSG_LEN(timeval_bytes));
            let mut message = libc::CMSG_FIRSTHDR(&raw const header);
            while !message.is_null() {
                if (*message).cmsg_level == libc::SOL_SOCKET
                    && (*message).cmsg_type == libc::SCM_TIMESTAMP
                    && u64::try_from((*message).cmsg_len).unwrap_or(0) >= long_enough
                {
                    let time: libc::timeval =
                        std::ptr::read_unaligned(libc::CMSG_DATA(message).cast());
                    received = since_epoch(time);
                }
                message = libc::CMSG_NXTHDR(&raw const header, message);
            }
        }
        Ok((read, received))
    }

    fn since_epoch(time: libc::timeval) -> Option<SystemTime> {
        let seconds = u64::try_from(time.tv_sec).ok()?;
        let micros = u64::try_from(time.tv_usec).ok()?;
        SystemTime::UNIX_EPOCH
            .checked_add(Duration::from_secs(seconds))?
            .checked_add(Duration::from_micros(micros))
    }

    /// The receive time on the monotonic clock: now, less how long ago it was by the wall
    /// clock. `None` if it is in the future or too old to believe. The wall clock is read
    /// first: were the thread held between the two readings, the time comes out late (as a
    /// read's own moment would be), never early, which could put a send in a second before
    /// the one it arrived in.
    pub(super) fn as_instant(received: SystemTime) -> Option<Instant> {
        let wall = SystemTime::now();
        let now = Instant::now();
        let ago = wall.duration_since(received).ok()?;
        if ago > OLDEST {
            return None;
        }
        now.checked_sub(ago)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::time::{Duration, Instant};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::{time_arrivals_on, ArrivalStream};
    use crate::sandbox::testing::{send_body, start, TestClient};
    use crate::sandbox::{Fault, Route, SandboxConfig};

    /// Bytes that waited in the socket while the reader was busy are timed when they arrived,
    /// not when they were read (a read's own moment would be 200 ms later).
    #[tokio::test]
    async fn bytes_read_late_are_timed_when_they_arrived() -> std::io::Result<()> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        time_arrivals_on(&listener);
        // Linux turns receive times on a moment after the first socket asks (a worker does
        // it); until then a read's own moment stands in. A sandbox's sends come later.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut client = TcpStream::connect(listener.local_addr()?).await?;
        let (accepted, _) = listener.accept().await?;
        let (mut stream, arrivals) = ArrivalStream::new(accepted);
        assert!(arrivals.latest().is_none());

        let sent = Instant::now();
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await?;
        std::thread::sleep(Duration::from_millis(200));
        let mut read = [0u8; 64];
        let count = stream.read(&mut read).await?;
        assert_eq!(read.get(..count), Some(&b"GET / HTTP/1.1\r\n\r\n"[..]));

        let arrived = arrivals
            .latest()
            .ok_or_else(|| std::io::Error::other("no arrival"))?;
        let after_send = arrived.saturating_duration_since(sent);
        assert!(
            after_send < Duration::from_millis(100),
            "{after_send:?} after the send"
        );
        // Nor before it (the clocks' conversion, within the microseconds' rounding).
        let before_send = sent.saturating_duration_since(arrived);
        assert!(
            before_send < Duration::from_millis(1),
            "{before_send:?} before the send"
        );

        // And what the peer writes back still goes out.
        stream.write_all(b"ok").await?;
        let count = client.read(&mut read).await?;
        assert_eq!(read.get(..count), Some(&b"ok"[..]));
        Ok(())
    }

    /// The sandbox counts a send in the second it arrived in, not when it got to read it: two
    /// sends 10 ms apart on one connection, the first held 1.5 s by an injected delay, so the
    /// second is handled 1.5 s after it arrived. Both count in one second (by when they were
    /// handled they would be 1.5 s apart: 1).
    #[tokio::test]
    async fn a_send_handled_late_counts_in_the_second_it_arrived() -> std::io::Result<()> {
        let sandbox = start(SandboxConfig::default()).await;
        let from = TestClient::new(&sandbox).sender_number().await;
        // Linux turns receive times on a moment after the sandbox asked.
        tokio::time::sleep(Duration::from_millis(100)).await;
        sandbox.inject(
            Route::Send,
            Fault {
                delay: Duration::from_millis(1500),
                times: Some(1),
                ..Fault::default()
            },
        );
        let address = sandbox.base_url().trim_start_matches("http://").to_owned();
        let request = |to: &str| {
            let body = send_body(&from, to).to_string();
            format!(
                "POST /v1/chat/messages/send HTTP/1.1\r\nhost: {address}\r\n\
                 authorization: Bearer {}\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\n\r\n{body}",
                sandbox.token(),
                body.len()
            )
        };
        let mut connection = TcpStream::connect(&address).await?;
        connection
            .write_all(request("14155550101").as_bytes())
            .await?;
        tokio::time::sleep(Duration::from_millis(10)).await;
        connection
            .write_all(request("14155550102").as_bytes())
            .await?;
        let deadline = Instant::now() + Duration::from_secs(20);
        let line = loop {
            let report = sandbox.traffic();
            let line = report.senders.into_iter().find(|line| line.sender == from);
            if let Some(line) = line.filter(|line| line.accepted == 2) {
                break line;
            }
            assert!(
                Instant::now() < deadline,
                "the two sends were not committed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(line.busiest_second, 2, "{line:?}");
        Ok(())
    }
}
