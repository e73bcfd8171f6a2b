//! The control plane's processes: each started under coreutils' `timeout`, so it dies by itself
//! after its lifetime even when the test process is killed, with its output in a log file, and
//! stopped when dropped.
use anyhow::{Context, Result};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Where a process logs, and how long it may live.
#[derive(Debug, Clone, Copy)]
pub struct Supervision<'a> {
    pub logs: &'a Path,
    pub lifetime: Duration,
}

pub struct Process {
    pub name: String,
    pub log: PathBuf,
    child: Child,
}

impl Process {
    pub fn spawn(
        name: &str,
        binary: &Path,
        args: &[String],
        env: &[(&str, String)],
        supervision: &Supervision,
    ) -> Result<Process> {
        let Supervision { logs, lifetime } = *supervision;
        let log = logs.join(format!("{name}.log"));
        // Appended to: a component started again (the policy's host after a kill) keeps the
        // log of its earlier life.
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let mut command = Command::new("timeout");
        command
            .arg("--signal=TERM")
            .arg("--kill-after=5")
            .arg(lifetime.as_secs().to_string())
            .arg(binary)
            .args(args)
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        for (key, value) in env {
            command.env(key, value);
        }
        let child = command
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        Ok(Process {
            name: name.to_string(),
            log,
            child,
        })
    }

    /// Whether it has exited, and how.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The component's own process id: the child of `timeout`.
    pub fn component_pid(&self) -> Result<u32> {
        let id = self.child.id();
        let children = std::fs::read_to_string(format!("/proc/{id}/task/{id}/children"))
            .with_context(|| format!("cannot read the children of {id}"))?;
        children
            .split_whitespace()
            .next()
            .and_then(|pid| pid.parse().ok())
            .with_context(|| format!("{} has no process under timeout", self.name))
    }

    /// SIGKILLs the component itself, as an OOM kill or a lost node does (killing `timeout`
    /// would leave the component running), and reaps `timeout`, which then exits.
    pub fn kill_hard(&mut self) -> Result<()> {
        let pid = self.component_pid()?;
        Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()?;
        for _ in 0..100 {
            if self.exited().is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        anyhow::bail!("{} did not exit after SIGKILL", self.name)
    }

    /// The last lines of its log.
    pub fn tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // Already reaped (killed): its pid may belong to another process by now.
        if self.exited().is_some() {
            return;
        }
        // SIGTERM to `timeout` is passed on to the component; then reap it.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        for _ in 0..50 {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}
