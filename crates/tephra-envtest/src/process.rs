//! A component's process: started with its output in a log file, and never outliving the
//! test. Each runs under a small `sh` watchdog that holds the read end of a pipe whose write
//! end only the test process has; when the test process ends in any way (a panic, an abort, a
//! `kill -9` of the test binary), the pipe closes and the watchdog kills the component. A
//! dropped [`Proc`] closes the pipe itself and waits for the component to be gone.

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Error;

/// The watchdog: runs "$@" with fd 3 on the pipe, kills it when the pipe reaches EOF, and
/// exits with it.
const WATCHDOG: &str = r#"exec 3<&0
"$@" </dev/null 3<&- &
c=$!
( read -r _ <&3; kill -KILL "$c" 2>/dev/null ) &
w=$!
exec 3<&-
wait "$c"
s=$?
kill "$w" 2>/dev/null
exit "$s""#;

/// A running component.
pub struct Proc {
    name: String,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    log: PathBuf,
}

/// A TCP port on loopback that was free a moment ago, taken below the kernel's ephemeral range.
///
/// A port the kernel hands out for `bind(0)` lies in the ephemeral range, which is also where
/// every outgoing connection takes its local port: between this call and the component's own
/// bind, one of the test's many loopback connections could take it (etcd once failed with
/// "address already in use" that way). Below that range only explicit binds compete; each
/// process walks its own pseudo-random sequence so that concurrent test binaries rarely meet.
pub fn free_port() -> Result<u16, Error> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const FLOOR: u32 = 10_000;
    let low = ephemeral_low().unwrap_or(32_768);
    if low > FLOOR + 1_000 {
        let span = low - FLOOR;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let seed = std::process::id().wrapping_mul(7_919).wrapping_add(nanos);
        for _ in 0..256 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            // 4_099 is prime: unless the span is a multiple of it, the walk visits every port.
            let port = FLOOR + seed.wrapping_add(n.wrapping_mul(4_099)) % span;
            let Ok(port) = u16::try_from(port) else {
                continue;
            };
            if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
                return Ok(port);
            }
        }
    }
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| Error::Io {
        what: "a free loopback port".into(),
        source: e,
    })?;
    l.local_addr().map(|a| a.port()).map_err(|e| Error::Io {
        what: "a free loopback port".into(),
        source: e,
    })
}

/// The first port of the kernel's ephemeral range, where Linux says it.
fn ephemeral_low() -> Option<u32> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

impl Proc {
    /// Starts `bin args...` with stdout and stderr appended to `log`.
    pub fn spawn(name: &str, bin: &Path, args: &[String], log: &Path) -> Result<Self, Error> {
        let io = |what: String| move |source| Error::Io { what, source };
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(io(log.display().to_string()))?;
        let err = out.try_clone().map_err(io(log.display().to_string()))?;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("sh")
            .arg(bin)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(io(format!("starting {}", bin.display())))?;
        let stdin = child.stdin.take();
        Ok(Self {
            name: name.to_string(),
            child: Some(child),
            stdin,
            log: log.to_path_buf(),
        })
    }

    /// The component's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Whether it has exited (and its exit status).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// The last `lines` lines of its log, for error messages.
    pub fn tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Kills it (SIGKILL) and waits until it is gone.
    pub fn kill(&mut self) {
        self.stdin.take();
        if let Some(mut child) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() > deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}
