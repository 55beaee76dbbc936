//! Temporaries named after their owner, atomic file writes, and removal of the temporaries a
//! killed process left behind. The same convention as `python/dense_pt/fsutil.py`:
//! `.<target>.<pid>-<host>.<random hex>.<kind>` (kind `tmp`, `partial` or `old`) in the target's
//! folder. A temporary is stale when its host is this host and its process is dead (kill -9,
//! SIGTERM, a crash); those are removed by the next writer into the same folder. Files of live
//! processes, of other hosts (a shared file system) and any other name are never touched.
//!
//! Errors name the user's path (the target), never the hidden temporary.
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

const KINDS: [&str; 3] = ["tmp", "partial", "old"];

/// This host's name with every character other than `[A-Za-z0-9_]` replaced by `_` (the tag's
/// parts are separated by `.` and `-`).
fn host() -> String {
    #[cfg(target_os = "linux")]
    {
        let mut buf = [0u8; 256];
        // SAFETY: gethostname writes at most buf.len() bytes into buf, which we own.
        let ok =
            unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) } == 0;
        if ok {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            let name: String = String::from_utf8_lossy(&buf[..end])
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            if !name.is_empty() {
                return name;
            }
        }
    }
    "host".to_string()
}

/// `<pid>-<host>` of this process.
pub fn owner_tag() -> String {
    format!("{}-{}", std::process::id(), host())
}

fn random_hex() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    h.write_u64(nanos);
    format!("{:08x}", h.finish() as u32)
}

/// The folder a path's file lives in (`.` for a bare name).
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A fresh temporary name `.<stem>.<owner>.<random>.<kind>` in `dir`.
pub fn temp_in(dir: &Path, stem: &str, kind: &str) -> PathBuf {
    dir.join(format!(".{stem}.{}.{}.{kind}", owner_tag(), random_hex()))
}

/// A fresh temporary name beside `target`.
pub fn temp_path(target: &Path, kind: &str) -> Result<PathBuf> {
    let name = target
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{}: not a file path", target.display())))?;
    Ok(temp_in(&parent_dir(target), &name.to_string_lossy(), kind))
}

/// `(pid, host)` of a temporary's file name, or None for any other name.
pub fn owner_of(name: &str) -> Option<(u32, String)> {
    let rest = name.strip_prefix('.')?;
    let mut parts = rest.rsplitn(4, '.');
    let kind = parts.next()?;
    let rand = parts.next()?;
    let owner = parts.next()?;
    parts.next()?; // the target's name
    if !KINDS.contains(&kind)
        || rand.is_empty()
        || !rand
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let (pid, host) = owner.split_once('-')?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) || host.is_empty() {
        return None;
    }
    Some((pid.parse().ok()?, host.to_string()))
}

/// Whether process `pid` exists on this host (a zombie counts as dead). Without a way to tell,
/// every process counts as alive, so nothing is ever removed by mistake.
pub fn pid_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    #[cfg(target_os = "linux")]
    {
        let Ok(p) = libc::pid_t::try_from(pid) else {
            return true;
        };
        // SAFETY: signal 0 only checks that the process exists; nothing is sent and no memory
        // is touched.
        if unsafe { libc::kill(p, 0) } != 0 {
            return std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH);
        }
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            if let Some((_, after)) = stat.rsplit_once(')') {
                return after.split_whitespace().next() != Some("Z");
            }
        }
        true
    }
    #[cfg(not(target_os = "linux"))]
    {
        true
    }
}

/// Remove the temporaries in `dir` whose owner process on this host is dead; returns them.
/// (A stale `.old` is only ever written by the Python side, which also restores it; here it is
/// left alone.)
pub fn remove_stale_temporaries(dir: &Path) -> Vec<PathBuf> {
    let me = host();
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return removed;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(".old") {
            continue;
        }
        let Some((pid, h)) = owner_of(name) else {
            continue;
        };
        if h != me || pid_alive(pid) {
            continue;
        }
        let path = entry.path();
        let ok = match entry.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path).is_ok(),
            _ => std::fs::remove_file(&path).is_ok(),
        };
        if ok {
            log::info!(
                "removed {}: a temporary of process {pid}, which is no longer running",
                path.display()
            );
            removed.push(path);
        }
    }
    removed
}

/// A file written under a temporary name beside `target` and renamed over it by
/// [`AtomicFile::commit`]; dropped uncommitted, the temporary is removed. The file is created
/// with mode 0666 before the umask (an ordinary file), and every error names `target`.
pub struct AtomicFile {
    target: PathBuf,
    tmp: PathBuf,
    file: Option<File>,
}

impl AtomicFile {
    pub fn create(target: &Path) -> Result<Self> {
        let dir = parent_dir(target);
        std::fs::create_dir_all(&dir).map_err(|e| Error::write(target, e))?;
        remove_stale_temporaries(&dir);
        let tmp = temp_path(target, "tmp")?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| Error::write(target, e))?;
        Ok(AtomicFile {
            target: target.to_path_buf(),
            tmp,
            file: Some(file),
        })
    }

    pub fn target(&self) -> &Path {
        &self.target
    }

    pub fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("open until committed")
    }

    /// A copy of the handle (e.g. for a `BufWriter`); the temporary stays owned by `self`.
    pub fn try_clone(&self) -> Result<File> {
        self.file
            .as_ref()
            .expect("open until committed")
            .try_clone()
            .map_err(|e| Error::write(&self.target, e))
    }

    /// fsync and rename over the target.
    pub fn commit(mut self) -> Result<PathBuf> {
        let file = self.file.take().expect("open until committed");
        let res = file
            .sync_all()
            .and_then(|_| {
                drop(file);
                std::fs::rename(&self.tmp, &self.target)
            })
            .map_err(|e| Error::write(&self.target, e));
        if res.is_err() {
            let _ = std::fs::remove_file(&self.tmp);
        }
        res.map(|_| self.target.clone())
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Write `bytes` to `target` atomically.
pub fn write_file_atomic(target: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = AtomicFile::create(target)?;
    f.file()
        .write_all(bytes)
        .map_err(|e| Error::write(target, e))?;
    f.commit().map(|_| ())
}

/// A scratch file in `dir` named as a temporary of `stem` (so a killed process's leftovers are
/// recognised and removed), deleted when dropped.
pub struct ScratchFile {
    path: PathBuf,
}

impl ScratchFile {
    pub fn create(dir: &Path, stem: &str) -> Result<(Self, File)> {
        let path = temp_in(dir, stem, "tmp");
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::write(dir, e))?;
        Ok((ScratchFile { path }, file))
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// xxh3-128 of a file's bytes, streamed (the corpus store's per-file checksum); errors name
/// `path`.
pub fn file_xxh3_128(path: &Path) -> Result<u128> {
    use std::io::Read;
    let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; 1 << 22];
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.digest128())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_foreign_names_are_ignored() {
        let p = temp_path(Path::new("some/dir/table.pmi"), "tmp").unwrap();
        let name = p.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with(".table.pmi."));
        assert_eq!(owner_of(name), Some((std::process::id(), host())));
        for foreign in [
            "table.pmi",
            ".table.pmi.tmp",
            ".table.pmi.12345.tmp",
            ".x.abc-host.00ff.tmp",
            ".x.12-host.zz.tmp",
            ".x.12-host.00ff.txt",
            ".12-host.00ff.tmp",
        ] {
            assert_eq!(owner_of(foreign), None, "{foreign}");
        }
    }

    #[test]
    fn stale_temporaries_of_dead_processes_go_live_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let h = host();
        // A pid that cannot exist (above the kernel's pid_max of 2^22).
        let dead = dir.path().join(format!(".t.pmi.99999999-{h}.0a0b.tmp"));
        let live = dir
            .path()
            .join(format!(".t.pmi.{}-{h}.0a0b.tmp", std::process::id()));
        let other_host = dir.path().join(".t.pmi.99999999-elsewhere.0a0b.tmp");
        let other_name = dir.path().join(".t.pmi.99999999.tmp");
        let dead_dir = dir.path().join(format!(".store.99999999-{h}.0c0d.partial"));
        for f in [&dead, &live, &other_host, &other_name] {
            std::fs::write(f, b"x").unwrap();
        }
        std::fs::create_dir(&dead_dir).unwrap();
        std::fs::write(dead_dir.join("tokens.arrow"), b"x").unwrap();
        let mut removed = remove_stale_temporaries(dir.path());
        removed.sort();
        let mut want = vec![dead.clone(), dead_dir.clone()];
        want.sort();
        assert_eq!(removed, want);
        assert!(live.exists() && other_host.exists() && other_name.exists());
    }

    #[test]
    fn atomic_file_commits_or_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("sub/out.bin");
        write_file_atomic(&target, b"hello").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"hello");
        {
            let mut f = AtomicFile::create(&target).unwrap();
            f.file().write_all(b"half").unwrap();
        } // dropped: the old content stays, the temporary goes
        assert_eq!(std::fs::read(&target).unwrap(), b"hello");
        assert_eq!(
            std::fs::read_dir(target.parent().unwrap()).unwrap().count(),
            1
        );
    }
}
