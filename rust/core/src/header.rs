//! The header of dense-pt's binary files (the BM25 index's `header.bin`, the n-gram table, the
//! negatives file), written and read in one place: the Rust twin of the Python side's manifests.
//!
//! Every such file starts with 8 magic bytes naming its kind and a `u32` format version, then the
//! kind's own fields, little-endian. [`Writer`] appends them; [`Reader::open`] checks the magic
//! and the version (one clear error naming the file and what to do) and reads the fields back,
//! refusing a truncated file with a `Format` error rather than a panic. The same reader walks a
//! whole file's body where a format is read field by field (the negatives file).
use std::path::Path;

use crate::error::{Error, Result};

// The files are memory-mapped and written as native arrays (`bytemuck` casts): the layouts are
// little-endian, so the crate refuses to build elsewhere rather than read garbage.
#[cfg(not(target_endian = "little"))]
compile_error!("dense-pt's binary files are little-endian arrays");

/// One kind of binary file: what it starts with and which format versions this build reads.
#[derive(Debug, Clone, Copy)]
pub struct Format {
    pub magic: &'static [u8; 8],
    /// How errors name the kind ("BM25 index").
    pub what: &'static str,
    /// The version this build writes (the newest it reads).
    pub version: u32,
    /// The oldest version this build still reads.
    pub oldest: u32,
    /// What a user does with a file of a version not read here ("rebuild it").
    pub remedy: &'static str,
}

/// Bytes of the magic and the version.
pub const PREFIX_LEN: usize = 12;

/// A header's bytes, field after field.
#[derive(Debug, Clone)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// The magic and `format.version`, ready for the kind's fields.
    pub fn new(format: &Format) -> Self {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(format.magic);
        buf.extend_from_slice(&format.version.to_le_bytes());
        Writer { buf }
    }

    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }

    /// A slice of numbers as its little-endian bytes.
    pub fn array<T: bytemuck::NoUninit>(&mut self, v: &[T]) -> &mut Self {
        self.bytes(bytemuck::cast_slice(v))
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// The fields of a file's bytes, read in order; errors name the file.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> Reader<'a> {
    /// Check `buf`'s magic and version against `format`; the reader then stands after them.
    pub fn open(format: &Format, path: &'a Path, buf: &'a [u8]) -> Result<(Self, u32)> {
        if buf.len() < PREFIX_LEN || &buf[..8] != format.magic {
            return Err(Error::format(
                path,
                format!(
                    "not a dense-pt {} (its first bytes are not {})",
                    format.what,
                    show(format.magic)
                ),
            ));
        }
        let mut r = Reader { buf, pos: 8, path };
        let version = r.u32()?;
        if !(format.oldest..=format.version).contains(&version) {
            let reads = if format.oldest == format.version {
                format!("version {}", format.version)
            } else {
                format!("versions {} to {}", format.oldest, format.version)
            };
            return Err(Error::format(
                path,
                format!(
                    "{} format version {version} is not supported (this dense-pt reads {reads}); {}",
                    format.what, format.remedy
                ),
            ));
        }
        Ok((r, version))
    }

    /// A reader of `buf` from its start, without a prefix check (a body after a checked header).
    pub fn at(path: &'a Path, buf: &'a [u8], pos: usize) -> Self {
        Reader { buf, pos, path }
    }

    pub fn err(&self, message: impl Into<String>) -> Error {
        Error::format(self.path, message)
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes of the whole buffer (the file).
    pub fn size(&self) -> usize {
        self.buf.len()
    }

    /// Bytes left after the reader's position.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let buf: &'a [u8] = self.buf;
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= buf.len())
            .ok_or_else(|| self.err(format!("truncated at byte {}", self.pos)))?;
        let s = &buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub fn u32(&mut self) -> Result<u32> {
        Ok(bytemuck::pod_read_unaligned(self.take(4)?))
    }

    pub fn u64(&mut self) -> Result<u64> {
        Ok(bytemuck::pod_read_unaligned(self.take(8)?))
    }

    pub fn f64(&mut self) -> Result<f64> {
        Ok(bytemuck::pod_read_unaligned(self.take(8)?))
    }

    /// `n` numbers, copied out (the bytes need not be aligned).
    pub fn array<T: bytemuck::AnyBitPattern + bytemuck::NoUninit>(
        &mut self,
        n: usize,
    ) -> Result<Vec<T>> {
        let size = std::mem::size_of::<T>();
        let bytes = n
            .checked_mul(size)
            .ok_or_else(|| self.err("count overflow"))?;
        Ok(bytemuck::pod_collect_to_vec(self.take(bytes)?))
    }

    /// A count field, at most the file's size, so that a corrupt count cannot ask for a huge
    /// allocation.
    pub fn count(&mut self, name: &str) -> Result<usize> {
        let n = self.u64()?;
        if n > self.buf.len() as u64 {
            return Err(self.err(format!("{name} = {n} exceeds the file size")));
        }
        Ok(n as usize)
    }
}

/// A magic for a message: its printable bytes, the zero padding left out.
fn show(magic: &[u8; 8]) -> String {
    let text: String = magic
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as char)
        .collect();
    format!("{text:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIND: Format = Format {
        magic: b"DPTEST\0\0",
        what: "test file",
        version: 3,
        oldest: 2,
        remedy: "write it again",
    };

    #[test]
    fn fields_round_trip_after_the_prefix() {
        let mut w = Writer::new(&KIND);
        w.u32(7).u64(1 << 40).f64(0.25).u8(9).array(&[1u32, 2, 3]);
        let bytes = w.into_bytes();
        assert_eq!(&bytes[..8], b"DPTEST\0\0");
        assert_eq!(&bytes[8..12], &3u32.to_le_bytes());
        let path = Path::new("f.bin");
        let (mut r, version) = Reader::open(&KIND, path, &bytes).unwrap();
        assert_eq!(version, 3);
        assert_eq!(r.u32().unwrap(), 7);
        assert_eq!(r.u64().unwrap(), 1 << 40);
        assert_eq!(r.f64().unwrap(), 0.25);
        assert_eq!(r.u8().unwrap(), 9);
        assert_eq!(r.array::<u32>(3).unwrap(), [1, 2, 3]);
        assert_eq!(r.remaining(), 0);
        let e = r.u32().unwrap_err().to_string();
        assert!(
            e.contains("f.bin") && e.contains("truncated at byte"),
            "{e}"
        );
    }

    #[test]
    fn an_older_version_in_range_is_read_and_others_are_refused_in_one_line() {
        let path = Path::new("f.bin");
        for (version, ok) in [(1u32, false), (2, true), (3, true), (4, false)] {
            let mut bytes = Writer::new(&KIND).into_bytes();
            bytes[8..12].copy_from_slice(&version.to_le_bytes());
            match Reader::open(&KIND, path, &bytes) {
                Ok((_, v)) => assert!(ok && v == version),
                Err(e) => {
                    assert!(!ok);
                    assert_eq!(
                        e.to_string(),
                        format!(
                            "f.bin: test file format version {version} is not supported (this \
                             dense-pt reads versions 2 to 3); write it again"
                        )
                    );
                }
            }
        }
    }

    #[test]
    fn another_magic_or_a_short_file_is_not_this_kind() {
        let path = Path::new("f.bin");
        for bytes in [&b"DPOTHER\0\x03\0\0\0"[..], &b"DPTEST"[..], &[][..]] {
            let e = Reader::open(&KIND, path, bytes).unwrap_err().to_string();
            assert_eq!(
                e,
                "f.bin: not a dense-pt test file (its first bytes are not \"DPTEST\")"
            );
        }
    }
}
