//! Streaming splitters for JSON inputs, so memory is bounded by one record, never by the file.
//!
//! [`JsonItems`] yields the raw bytes of each top-level element of a JSON array (HotpotQA,
//! TAT-QA, 2Wiki, HybridQA files are one big array), of each line of a JSON-lines file
//! (MuSiQue), or of each line of a Wikidata dump (`[`, then one entity per line with a trailing
//! comma, then `]`), with the byte offset and line where it starts. It tracks string/escape
//! state and nesting depth only, so a syntax error inside one element costs that element alone:
//! the caller parses each element with serde_json and quarantines the ones that fail.

use std::io::{self, BufRead};

/// One raw top-level element.
#[derive(Debug, Clone)]
pub struct RawItem {
    pub bytes: Vec<u8>,
    /// Byte offset of the element's first byte in the (decompressed) input.
    pub offset: u64,
    /// 1-based line where the element starts.
    pub line: u64,
    /// 0-based index of the element.
    pub index: u64,
}

/// A structural problem the splitter cannot recover from locally.
#[derive(Debug)]
pub enum SplitError {
    Io(io::Error),
    /// The input ended inside an element (unbalanced brackets or an open string).
    Truncated {
        offset: u64,
        line: u64,
        excerpt: Vec<u8>,
    },
    /// An element longer than [`JsonItems::max_item`]: it was read past without being held
    /// (its first bytes kept as `excerpt`), and reading goes on with the next element.
    TooLarge {
        offset: u64,
        line: u64,
        /// 0-based index of the element.
        index: u64,
        /// The element's length in bytes.
        len: u64,
        limit: usize,
        excerpt: Vec<u8>,
    },
}

impl std::fmt::Display for SplitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SplitError::Io(e) => write!(f, "{e}"),
            SplitError::Truncated { offset, line, .. } => {
                write!(
                    f,
                    "input ends inside the element at byte {offset} (line {line})"
                )
            }
            SplitError::TooLarge { len, limit, .. } => write!(
                f,
                "record of {len} bytes is over the limit of {limit} bytes; it was read past, \
                 not parsed (raise the limit if it is a real record; else a bracket or quote \
                 may be unbalanced)"
            ),
        }
    }
}

/// Iterator over the top-level elements of a JSON array or a JSON-lines stream.
pub struct JsonItems<R> {
    reader: R,
    offset: u64,
    line: u64,
    index: u64,
    started: bool,
    /// Whether the input is an array (`[`...`]`) or a sequence of values.
    in_array: bool,
    done: bool,
    /// Bytes of a broken element kept as its excerpt.
    pub max_excerpt: usize,
    /// Largest element accepted (default 64 MiB); see [`SplitError::TooLarge`].
    pub max_item: usize,
}

impl<R: BufRead> JsonItems<R> {
    pub fn new(reader: R) -> JsonItems<R> {
        JsonItems {
            reader,
            offset: 0,
            line: 1,
            index: 0,
            started: false,
            in_array: false,
            done: false,
            max_excerpt: 512,
            max_item: distillery_core::spec::DEFAULT_MAX_RECORD_BYTES as usize,
        }
    }

    /// Elements of input that starts at byte `offset` of a file (a byte range of a JSON-lines
    /// file): offsets are absolute; lines and indexes count from the range's start.
    pub fn starting_at(reader: R, offset: u64) -> JsonItems<R> {
        JsonItems {
            offset,
            ..JsonItems::new(reader)
        }
    }

    fn peek_byte(&mut self) -> io::Result<Option<u8>> {
        let buf = self.reader.fill_buf()?;
        Ok(buf.first().copied())
    }

    fn bump(&mut self) -> io::Result<Option<u8>> {
        let b = self.peek_byte()?;
        if let Some(b) = b {
            self.reader.consume(1);
            self.offset += 1;
            if b == b'\n' {
                self.line += 1;
            }
        }
        Ok(b)
    }

    /// Skips whitespace and separators between elements.
    fn skip_separators(&mut self) -> io::Result<Option<u8>> {
        loop {
            // Fast path over a whole buffer of whitespace.
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                return Ok(None);
            }
            let mut n = 0;
            let mut lines = 0;
            let mut found = None;
            for &b in buf {
                match b {
                    b' ' | b'\t' | b'\r' | b',' => n += 1,
                    b'\n' => {
                        n += 1;
                        lines += 1
                    }
                    0xEF | 0xBB | 0xBF if self.offset == 0 && !self.started => n += 1,
                    _ => {
                        found = Some(b);
                        break;
                    }
                }
            }
            self.reader.consume(n);
            self.offset += n as u64;
            self.line += lines;
            if found.is_some() {
                return Ok(found);
            }
        }
    }

    fn next_item(&mut self) -> Result<Option<RawItem>, SplitError> {
        if self.done {
            return Ok(None);
        }
        let first = self.skip_separators().map_err(SplitError::Io)?;
        let Some(first) = first else {
            self.done = true;
            return Ok(None);
        };
        if !self.started {
            self.started = true;
            if first == b'[' {
                self.in_array = true;
                self.bump().map_err(SplitError::Io)?;
                return self.next_item();
            }
        }
        if first == b']' && self.in_array {
            self.bump().map_err(SplitError::Io)?;
            if self.skip_separators().map_err(SplitError::Io)?.is_none() {
                self.done = true;
                return Ok(None);
            }
            // Content after the array's closing bracket (a stray `]` inside it, or trailing
            // data): read on as a sequence of values, so nothing is dropped without a count.
            self.in_array = false;
            return self.next_item();
        }
        let offset = self.offset;
        let line = self.line;
        let mut bytes: Vec<u8> = Vec::with_capacity(256);
        // Bytes of the element so far; past `max_item`, `bytes` keeps only the excerpt.
        let mut len: u64 = 0;
        let mut skipping = false;
        let mut depth: i64 = 0;
        let mut in_str = false;
        let mut esc = false;
        loop {
            let buf = self.reader.fill_buf().map_err(SplitError::Io)?;
            if buf.is_empty() {
                self.done = true;
                if !skipping && bytes.iter().all(|b| b.is_ascii_whitespace()) {
                    return Ok(None);
                }
                if depth == 0 && !in_str {
                    // A scalar element running to the end of input.
                    break;
                }
                if skipping {
                    // Reported as cut, with the excerpt of its start.
                    return Err(SplitError::Truncated {
                        offset,
                        line,
                        excerpt: std::mem::take(&mut bytes),
                    });
                }
                let excerpt = bytes[..bytes.len().min(self.max_excerpt)].to_vec();
                return Err(SplitError::Truncated {
                    offset,
                    line,
                    excerpt,
                });
            }
            let mut n = 0;
            let mut end = false;
            let mut lines = 0;
            for &b in buf {
                if in_str {
                    n += 1;
                    if esc {
                        esc = false;
                    } else if b == b'\\' {
                        esc = true;
                    } else if b == b'"' {
                        in_str = false;
                    } else if b == b'\n' {
                        // A raw newline in a string is invalid JSON; end the element at the
                        // line so one broken line cannot swallow the rest of a JSONL file.
                        lines += 1;
                        if !self.in_array {
                            end = true;
                            break;
                        }
                    }
                    continue;
                }
                match b {
                    b'"' => in_str = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth < 0 {
                            if self.in_array && b == b']' {
                                // The array closes right after this element.
                                end = true;
                                break;
                            }
                            // A stray closing bracket: it belongs to this (bad) element, so
                            // the splitter always moves forward.
                            n += 1;
                            end = true;
                            break;
                        }
                    }
                    b',' if depth == 0 => {
                        end = true;
                        break;
                    }
                    b'\n' if depth == 0 || !self.in_array => {
                        // Lines end elements in JSON-lines inputs, and at depth 0 in arrays.
                        end = true;
                        break;
                    }
                    b'\n' => lines += 1,
                    _ => {}
                }
                n += 1;
                if depth == 0 && matches!(b, b'}' | b']') && !self.in_array {
                    end = true;
                    break;
                }
            }
            if !skipping {
                bytes.extend_from_slice(&buf[..n]);
            }
            len += n as u64;
            self.reader.consume(n);
            self.offset += n as u64;
            self.line += lines;
            if !skipping && bytes.len() > self.max_item {
                // Keep the start as the excerpt and read past the rest.
                skipping = true;
                bytes.truncate(self.max_excerpt.min(self.max_item));
                bytes.shrink_to_fit();
            }
            if end {
                break;
            }
        }
        if skipping {
            let index = self.index;
            self.index += 1;
            return Err(SplitError::TooLarge {
                offset,
                line,
                index,
                len,
                limit: self.max_item,
                excerpt: bytes,
            });
        }
        if bytes.is_empty()
            && !(self.in_array && self.peek_byte().map_err(SplitError::Io)? == Some(b']'))
        {
            // Never return an empty element at the same offset twice.
            self.bump().map_err(SplitError::Io)?;
        }
        while bytes.last().is_some_and(|b| b.is_ascii_whitespace()) {
            bytes.pop();
        }
        let index = self.index;
        self.index += 1;
        Ok(Some(RawItem {
            bytes,
            offset,
            line,
            index,
        }))
    }
}

impl<R: BufRead> Iterator for JsonItems<R> {
    type Item = Result<RawItem, SplitError>;
    fn next(&mut self) -> Option<Self::Item> {
        match self.next_item() {
            Ok(Some(i)) => Some(Ok(i)),
            Ok(None) => None,
            // An oversized element is skipped: the next one follows.
            Err(e @ SplitError::TooLarge { .. }) => Some(Err(e)),
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(s: &str) -> Vec<String> {
        JsonItems::new(s.as_bytes())
            .map(|r| String::from_utf8(r.unwrap().bytes).unwrap())
            .collect()
    }

    #[test]
    fn splits_arrays() {
        assert_eq!(
            items(r#"[{"a":[1,2]}, {"b":"x,]}"} ,{"c":{"d":1}}]"#),
            vec![r#"{"a":[1,2]}"#, r#"{"b":"x,]}"}"#, r#"{"c":{"d":1}}"#]
        );
        assert_eq!(items("[]"), Vec::<String>::new());
        assert_eq!(items(" [ 1, 2 ] "), vec!["1", "2"]);
    }

    #[test]
    fn splits_lines_and_wikidata_dumps() {
        assert_eq!(
            items("{\"a\":1}\n{\"b\":2}\n"),
            vec!["{\"a\":1}", "{\"b\":2}"]
        );
        assert_eq!(
            items("[\n{\"id\":\"Q1\"},\n{\"id\":\"Q2\"},\n]\n"),
            vec!["{\"id\":\"Q1\"}", "{\"id\":\"Q2\"}"]
        );
    }

    #[test]
    fn broken_jsonl_line_is_isolated() {
        let v = items("{\"a\":1}\n{\"b\": \"open\n{\"c\":3}\n");
        assert_eq!(v.len(), 3);
        assert_eq!(v[2], "{\"c\":3}");
    }

    #[test]
    fn offsets_and_lines() {
        let s = "[\n {\"a\":1},\n {\"b\":2}\n]";
        let v: Vec<RawItem> = JsonItems::new(s.as_bytes()).map(|r| r.unwrap()).collect();
        assert_eq!(v[1].offset as usize, s.find("{\"b\"").unwrap());
        assert_eq!(v[1].line, 3);
        assert_eq!(v[1].index, 1);
    }

    #[test]
    fn stray_closing_brackets_never_stall() {
        // A pretty-printed object read as lines, and a stray `}` inside an array: each bad piece
        // becomes its own element and the splitter reaches the end.
        let v = items("{\n\"a\": 1\n}\n");
        assert_eq!(v.len(), 3, "{v:?}");
        let v = items(r#"[{"a":1}}, {"b":2}]"#);
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!(v[0], r#"{"a":1}}"#);
        assert_eq!(v[1], r#"{"b":2}"#);
        let v = items("}\n}\n{\"c\":3}\n");
        assert_eq!(v, vec!["}", "}", "{\"c\":3}"]);
    }

    #[test]
    fn data_after_an_early_array_end_is_kept() {
        let v = items(r#"[{"a":1}], {"b":2}]"#);
        assert_eq!(v, vec![r#"{"a":1}"#, r#"{"b":2}"#, "]"]);
    }

    #[test]
    fn an_element_swallowing_the_rest_is_one_oversized_element() {
        let mut s = String::from("[{\"a\": [1, 2}, ");
        for i in 0..1000 {
            s.push_str(&format!("{{\"n\": {i}}}, "));
        }
        s.push(']');
        let mut it = JsonItems::new(s.as_bytes());
        it.max_item = 2048;
        let r: Vec<_> = it.collect();
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(
            matches!(&r[0], Err(SplitError::TooLarge { offset: 1, len, excerpt, .. })
                if *len == s.len() as u64 - 1 && excerpt.len() == 512),
            "{:?}",
            r[0]
        );
    }

    #[test]
    fn an_oversized_element_is_skipped_and_the_next_ones_read() {
        for (open, close) in [("[", "]"), ("", "")] {
            let sep = if open.is_empty() { "\n" } else { ",\n" };
            let big = format!("{{\"big\": \"{}\"}}", "x".repeat(10_000));
            let s = format!("{open}{{\"a\":1}}{sep}{big}{sep}{{\"b\":2}}{close}\n");
            let mut it = JsonItems::new(s.as_bytes());
            it.max_item = 1000;
            let r: Vec<_> = it.collect();
            assert_eq!(r.len(), 3, "{r:?}");
            assert_eq!(r[0].as_ref().unwrap().bytes, b"{\"a\":1}");
            match &r[1] {
                Err(SplitError::TooLarge {
                    offset,
                    len,
                    index,
                    excerpt,
                    ..
                }) => {
                    assert_eq!(*offset as usize, s.find("{\"big").unwrap());
                    assert_eq!(*len as usize, big.len());
                    assert_eq!(*index, 1);
                    assert!(excerpt.starts_with(b"{\"big\""));
                    assert_eq!(excerpt.len(), 512);
                }
                other => panic!("{other:?}"),
            }
            let last = r[2].as_ref().unwrap();
            assert_eq!((last.bytes.as_slice(), last.index), (&b"{\"b\":2}"[..], 2));
        }
    }

    #[test]
    fn truncated_array_is_reported() {
        let mut it = JsonItems::new(r#"[{"a":1},{"b":[1,2"#.as_bytes());
        assert!(it.next().unwrap().is_ok());
        assert!(matches!(it.next(), Some(Err(SplitError::Truncated { .. }))));
        assert!(it.next().is_none());
    }
}
