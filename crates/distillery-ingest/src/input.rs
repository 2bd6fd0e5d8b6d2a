//! Opening inputs: where bytes come from ([`Opener`]), transparent decompression by magic
//! bytes (bz2, gzip, zstd), and byte counting for progress.

use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use distillery_core::spec::FormatOptions;

use crate::error::IngestError;
use crate::range::ByteRange;

/// Gives readers access to their input and its side files (name maps, table directories).
/// [`LocalFs`] reads the local disk; the executor provides one backed by object_store for
/// `s3://`, `gs://` and `az://` inputs.
pub trait Opener: Send + Sync {
    /// Opens a location for sequential reading (raw bytes, not decompressed).
    fn open(&self, location: &str) -> io::Result<Box<dyn Read + Send>>;
    /// Size in bytes.
    fn size(&self, location: &str) -> io::Result<u64>;
    /// Reads `len` bytes at `offset` (for parallel decoding of multistream dumps).
    fn read_range(&self, location: &str, offset: u64, len: u64) -> io::Result<Vec<u8>>;
    /// Whether a location exists.
    fn exists(&self, location: &str) -> bool;
    /// Lists the files directly inside a directory location (names only, sorted).
    fn list(&self, dir: &str) -> io::Result<Vec<String>>;
    /// A location relative to the directory holding `location`.
    fn sibling(&self, location: &str, relative: &str) -> String {
        match location.rfind('/') {
            Some(i) => format!("{}/{}", &location[..i], relative),
            None => relative.to_string(),
        }
    }
    /// `dir` joined with `name`.
    fn join(&self, dir: &str, name: &str) -> String {
        format!("{}/{}", dir.trim_end_matches('/'), name)
    }
}

/// The local file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalFs;

impl Opener for LocalFs {
    fn open(&self, location: &str) -> io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(std::fs::File::open(local_path(location))?))
    }
    fn size(&self, location: &str) -> io::Result<u64> {
        Ok(std::fs::metadata(local_path(location))?.len())
    }
    fn read_range(&self, location: &str, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        use std::io::{Seek, SeekFrom};
        let mut f = std::fs::File::open(local_path(location))?;
        f.seek(SeekFrom::Start(offset))?;
        let mut buf = Vec::with_capacity(len as usize);
        f.take(len).read_to_end(&mut buf)?;
        Ok(buf)
    }
    fn exists(&self, location: &str) -> bool {
        local_path(location).exists()
    }
    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(local_path(dir))? {
            let e = e?;
            if e.file_type()?.is_file() {
                v.push(e.file_name().to_string_lossy().into_owned());
            }
        }
        v.sort();
        Ok(v)
    }
}

fn local_path(location: &str) -> PathBuf {
    Path::new(location.strip_prefix("file://").unwrap_or(location)).to_path_buf()
}

/// Compression of an input, detected from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Bzip2,
    Gzip,
    Zstd,
}

impl Compression {
    pub fn detect(head: &[u8]) -> Compression {
        if head.starts_with(b"BZh") {
            Compression::Bzip2
        } else if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }
}

/// Counts bytes flowing through a reader into a shared counter (compressed bytes, for
/// progress and `bytes_in`).
pub struct CountingReader<R> {
    inner: R,
    counter: Arc<AtomicU64>,
}

impl<R: Read> CountingReader<R> {
    pub fn new(inner: R, counter: Arc<AtomicU64>) -> Self {
        CountingReader { inner, counter }
    }
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counter.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// How much decoded bz2 one read asks for (see [`open_decompressed`]).
const BZ2_READ: usize = 1 << 20;

/// Opens a location and wraps it in the right decompressor. Multi-stream bz2, gzip
/// (concatenated members) and zstd (concatenated frames) are read to the end. A truncated or
/// corrupt compressed stream surfaces as an `io::Error` from `read` that [`is_data_error`]
/// accepts; readers turn that into a `truncated_input` quarantine record and keep what they
/// read before it.
pub fn open_decompressed(
    opener: &dyn Opener,
    location: &str,
    counter: Arc<AtomicU64>,
) -> Result<(Box<dyn BufRead + Send>, Compression), IngestError> {
    let raw = opener
        .open(location)
        .map_err(|e| IngestError::io(location, e))?;
    let mut buffered = BufReader::with_capacity(1 << 16, CountingReader::new(raw, counter));
    let head = buffered
        .fill_buf()
        .map_err(|e| IngestError::io(location, e))?;
    let c = Compression::detect(head);
    let reader: Box<dyn BufRead + Send> = match c {
        Compression::None => Box::new(buffered),
        // bz2 output is read 1 MiB at a time: the decoder walks a 3.6 MB block table in
        // random order, and giving it longer runs between the parser's passes keeps more of
        // that table in cache.
        Compression::Bzip2 => Box::new(BufReader::with_capacity(
            BZ2_READ,
            bzip2::read::MultiBzDecoder::new(buffered),
        )),
        Compression::Gzip => Box::new(BufReader::with_capacity(
            1 << 16,
            flate2::bufread::MultiGzDecoder::new(buffered),
        )),
        Compression::Zstd => Box::new(BufReader::with_capacity(
            1 << 16,
            ZstdReader::new(buffered).map_err(|e| IngestError::io(location, e))?,
        )),
    };
    Ok((reader, c))
}

/// A streaming zstd decoder (all frames, to the end) whose errors read as those of the other
/// decoders: zstd reports corrupt data as `ErrorKind::Other`, which [`is_data_error`] would take
/// for a failure to read, so an `Other` error that did not come from the source becomes
/// `InvalidData`. A cut stream is already `UnexpectedEof`; the source's own errors pass as
/// they are.
struct ZstdReader<R: BufRead> {
    decoder: zstd::stream::read::Decoder<'static, SourceErrors<R>>,
}

impl<R: BufRead> ZstdReader<R> {
    fn new(source: R) -> io::Result<Self> {
        let source = SourceErrors {
            inner: source,
            failed: false,
        };
        Ok(ZstdReader {
            decoder: zstd::stream::read::Decoder::with_buffer(source)?,
        })
    }
}

impl<R: BufRead> Read for ZstdReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.decoder.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Other && !self.decoder.get_ref().failed => {
                Err(io::Error::new(io::ErrorKind::InvalidData, e))
            }
            r => r,
        }
    }
}

/// A reader that notes whether it returned an error (so a decoder's own errors can be told
/// from its source's).
struct SourceErrors<R> {
    inner: R,
    failed: bool,
}

impl<R: BufRead> Read for SourceErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let r = self.inner.read(buf);
        self.failed |= r.is_err();
        r
    }
}

impl<R: BufRead> BufRead for SourceErrors<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        match self.inner.fill_buf() {
            Ok(b) => Ok(b),
            Err(e) => {
                self.failed = true;
                Err(e)
            }
        }
    }

    fn consume(&mut self, amt: usize) {
        self.inner.consume(amt);
    }
}

/// Bytes a [`ReadAhead`] thread reads at a time.
const READ_AHEAD_CHUNK: usize = 1 << 20;
/// Chunks a [`ReadAhead`] thread may hold ready.
const READ_AHEAD_DEPTH: usize = 4;

/// A reader whose bytes a thread of its own pulls from `inner`: a decompressor of a
/// single-stream file runs on that thread while the caller parses on its own, so the two
/// take two cores (a bz2 dump decompresses about as fast as its XML parses). The thread stays
/// at most [`READ_AHEAD_DEPTH`] chunks of [`READ_AHEAD_CHUNK`] ahead (memory: ~5 MiB), and an
/// error of `inner` arrives after the bytes read before it, as from `inner` itself. Dropping
/// the reader stops the thread at its next chunk.
pub struct ReadAhead {
    rx: std::sync::mpsc::Receiver<io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    pos: usize,
    done: bool,
}

impl ReadAhead {
    pub fn new(mut inner: Box<dyn Read + Send>) -> ReadAhead {
        let (tx, rx) = std::sync::mpsc::sync_channel(READ_AHEAD_DEPTH);
        std::thread::spawn(move || {
            loop {
                let mut chunk = vec![0u8; READ_AHEAD_CHUNK];
                let mut filled = 0;
                let end = loop {
                    match inner.read(&mut chunk[filled..]) {
                        Ok(0) => break Ok(true),
                        Ok(n) => {
                            filled += n;
                            if filled == chunk.len() {
                                break Ok(false);
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => break Err(e),
                    }
                };
                chunk.truncate(filled);
                if filled > 0 && tx.send(Ok(chunk)).is_err() {
                    return;
                }
                match end {
                    Ok(false) => {}
                    Ok(true) => return,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                }
            }
        });
        ReadAhead {
            rx,
            chunk: Vec::new(),
            pos: 0,
            done: false,
        }
    }
}

impl Read for ReadAhead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let avail = self.fill_buf()?;
        let n = avail.len().min(buf.len());
        buf[..n].copy_from_slice(&avail[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for ReadAhead {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.pos >= self.chunk.len() && !self.done {
            match self.rx.recv() {
                Ok(Ok(chunk)) => {
                    self.chunk = chunk;
                    self.pos = 0;
                }
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                Err(_) => self.done = true,
            }
        }
        Ok(&self.chunk[self.pos.min(self.chunk.len())..])
    }

    fn consume(&mut self, amt: usize) {
        self.pos += amt;
    }
}

/// Whether an IO error from a (decompressing) reader means bad *data* (a cut or corrupt
/// stream: quarantine it and keep what was read) rather than a failure to read (a network or
/// disk error: the input must fail, or a retry could succeed). Decoders report cut streams as
/// `UnexpectedEof` and corrupt ones as `InvalidData`/`InvalidInput`.
pub fn is_data_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput
    )
}

/// Everything a reader needs to know about the input it reads.
pub struct InputCtx<'a> {
    /// The location as given (path or URL), used in quarantine records and errors.
    pub location: String,
    /// The file name (last path component), part of record ids and provenance.
    pub source: String,
    /// Index of this file among the input's files.
    pub file_index: usize,
    pub split: Option<String>,
    pub options: &'a FormatOptions,
    pub opener: &'a dyn Opener,
    /// Compressed bytes consumed so far.
    pub bytes_read: Arc<AtomicU64>,
    /// The part of the file this read covers, `None` for all of it; see [`ByteRange`] for what
    /// each format reads of a range and [`crate::split_ranges`] for how ranges are planned.
    pub range: Option<ByteRange>,
}

impl<'a> InputCtx<'a> {
    /// A context for a local file with default options (tests and one-off reads).
    pub fn local(location: &str, options: &'a FormatOptions) -> InputCtx<'a> {
        InputCtx::opened_by(location, options, &LocalFs)
    }

    /// A context for one file read on its own (no input around it: file index 0, split
    /// guessed from the name) through `opener`.
    pub fn opened_by(
        location: &str,
        options: &'a FormatOptions,
        opener: &'a dyn Opener,
    ) -> InputCtx<'a> {
        InputCtx {
            location: location.to_string(),
            source: file_name(location),
            file_index: 0,
            split: None,
            options,
            opener,
            bytes_read: Arc::new(AtomicU64::new(0)),
            range: None,
        }
    }

    /// The same context reading only `range` of the file.
    pub fn with_range(mut self, range: ByteRange) -> InputCtx<'a> {
        self.range = Some(range);
        self
    }

    /// Opens the input decompressed.
    pub fn open(&self) -> Result<Box<dyn BufRead + Send>, IngestError> {
        Ok(open_decompressed(self.opener, &self.location, self.bytes_read.clone())?.0)
    }

    /// The split name: the configured one, else guessed from the file name
    /// (`train`, `dev`, `validation`, `test`), else `unknown`.
    pub fn split(&self) -> String {
        if let Some(s) = &self.split {
            return s.clone();
        }
        let n = self.source.to_lowercase();
        for s in ["train", "dev", "validation", "test"] {
            if n.contains(s) {
                return s.to_string();
            }
        }
        "unknown".to_string()
    }
}

/// The last path component of a location.
pub fn file_name(location: &str) -> String {
    location
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(location)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn read_ahead_gives_the_bytes_then_the_error_of_its_reader() {
        struct Cut(io::Cursor<Vec<u8>>);
        impl Read for Cut {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = buf.len().min(7777);
                match self.0.read(&mut buf[..n])? {
                    0 => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "cut")),
                    n => Ok(n),
                }
            }
        }
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let mut r = ReadAhead::new(Box::new(io::Cursor::new(data.clone())));
        let mut got = Vec::new();
        r.read_to_end(&mut got).unwrap();
        assert_eq!(got, data);
        let mut r = ReadAhead::new(Box::new(Cut(io::Cursor::new(data.clone()))));
        let mut got = Vec::new();
        let e = r.read_to_end(&mut got).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(got, data);
    }

    #[test]
    fn detects_and_decompresses() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(b"hello\n").unwrap();
        std::fs::write(&p, enc.finish().unwrap()).unwrap();
        let n = Arc::new(AtomicU64::new(0));
        let (mut r, c) = open_decompressed(&LocalFs, p.to_str().unwrap(), n.clone()).unwrap();
        assert_eq!(c, Compression::Gzip);
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello\n");
        assert!(n.load(Ordering::Relaxed) > 0);
    }

    fn open_zstd(data: &[u8]) -> (io::Result<Vec<u8>>, Compression) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.zst");
        std::fs::write(&p, data).unwrap();
        let n = Arc::new(AtomicU64::new(0));
        let (mut r, c) = open_decompressed(&LocalFs, p.to_str().unwrap(), n).unwrap();
        let mut got = Vec::new();
        (r.read_to_end(&mut got).map(|_| got), c)
    }

    #[test]
    fn decompresses_zstd_frames_to_the_end() {
        let mut data = zstd::encode_all(&b"hello\n"[..], 3).unwrap();
        data.extend(zstd::encode_all(&b"world\n"[..], 19).unwrap());
        let (got, c) = open_zstd(&data);
        assert_eq!(c, Compression::Zstd);
        assert_eq!(got.unwrap(), b"hello\nworld\n");
    }

    #[test]
    fn cut_or_corrupt_zstd_is_a_data_error() {
        let text: Vec<u8> = (0..200_000u32)
            .flat_map(|i| i.to_string().into_bytes())
            .collect();
        let data = zstd::encode_all(&text[..], 3).unwrap();
        let (got, _) = open_zstd(&data[..data.len() / 2]);
        let e = got.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
        assert!(is_data_error(&e));
        let mut bad = data.clone();
        for b in &mut bad[20..200] {
            *b ^= 0x5a;
        }
        let (got, _) = open_zstd(&bad);
        let e = got.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        assert!(is_data_error(&e));
    }

    #[test]
    fn split_is_guessed_from_the_name() {
        let o = FormatOptions::default_for(distillery_core::spec::Format::HotpotQa);
        let c = InputCtx::local("/x/hotpot_dev_distractor_v1.json", &o);
        assert_eq!(c.split(), "dev");
        assert_eq!(c.source, "hotpot_dev_distractor_v1.json");
    }
}
