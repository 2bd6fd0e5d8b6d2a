//! The N-Triples line parser: one line into borrowed terms, and string escape decoding.

use std::borrow::Cow;
use std::fmt;

use memchr::{memchr, memchr3};

use super::NS;

/// One RDF term as it appears in the line (escapes not yet decoded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Term<'a> {
    /// The text between `<` and `>`.
    Iri(&'a str),
    /// The label after `_:`.
    Blank(&'a str),
    Literal {
        /// The text between the quotes.
        value: &'a str,
        lang: Option<&'a str>,
        /// The datatype IRI's text between `<` and `>`.
        datatype: Option<&'a str>,
    },
}

/// One N-Triples statement, borrowed from its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Statement<'a> {
    pub(super) subject: Term<'a>,
    pub(super) predicate: &'a str,
    pub(super) object: Term<'a>,
}

/// A syntax error in a line: what and where (0-based byte column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SyntaxError {
    column: usize,
    message: &'static str,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at column {}", self.message, self.column + 1)
    }
}

/// Parses one line: `Ok(None)` for a blank or comment-only line.
pub(super) fn parse_line(line: &str) -> Result<Option<Statement<'_>>, SyntaxError> {
    let mut c = Cursor {
        s: line,
        b: line.as_bytes(),
        pos: 0,
    };
    c.skip_ws();
    if matches!(c.peek(), None | Some(b'#')) {
        return Ok(None);
    }
    let subject = match c.peek() {
        Some(b'<') => Term::Iri(c.iri()?),
        Some(b'_') => Term::Blank(c.blank()?),
        _ => return Err(c.err("expected an IRI or a blank node as subject")),
    };
    c.skip_ws();
    if c.peek() != Some(b'<') {
        return Err(c.err("expected an IRI as predicate"));
    }
    let predicate = c.iri()?;
    c.skip_ws();
    let object = match c.peek() {
        Some(b'<') => Term::Iri(c.iri()?),
        Some(b'_') => Term::Blank(c.blank()?),
        Some(b'"') => c.literal()?,
        _ => return Err(c.err("expected an IRI, a blank node or a literal as object")),
    };
    c.skip_ws();
    if c.peek() != Some(b'.') {
        return Err(c.err("expected '.' after the object"));
    }
    c.pos += 1;
    c.skip_ws();
    if !matches!(c.peek(), None | Some(b'#')) {
        return Err(c.err("unexpected text after '.'"));
    }
    Ok(Some(Statement {
        subject,
        predicate,
        object,
    }))
}

struct Cursor<'a> {
    s: &'a str,
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn err(&self, message: &'static str) -> SyntaxError {
        self.err_at(self.pos, message)
    }

    fn err_at(&self, column: usize, message: &'static str) -> SyntaxError {
        SyntaxError { column, message }
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    /// `<iri>` at `pos`; returns the text between the brackets.
    fn iri(&mut self) -> Result<&'a str, SyntaxError> {
        let start = self.pos + 1;
        let end = match memchr(b'>', &self.b[start..]) {
            Some(i) => start + i,
            None => return Err(self.err("unterminated IRI")),
        };
        let body = &self.b[start..end];
        // Nearly every IRI of the dump is in `ns:`, whose 27 bytes are valid and hold the
        // scheme: only the local name needs checking.
        let mut i = if body.starts_with(NS.as_bytes()) {
            NS.len()
        } else if has_scheme(body) {
            0
        } else {
            return Err(self.err_at(start, "relative IRI (N-Triples IRIs are absolute)"));
        };
        while i < body.len() {
            match IRI_BYTES[usize::from(body[i])] {
                IriByte::Plain => i += 1,
                IriByte::Escape => match hex_escape(&body[i..]) {
                    Some(n) => i += n,
                    None => return Err(self.err_at(start + i, "invalid escape in IRI")),
                },
                IriByte::Invalid => {
                    return Err(self.err_at(start + i, "invalid character in IRI"));
                }
            }
        }
        self.pos = end + 1;
        Ok(&self.s[start..end])
    }

    /// `_:label` at `pos`; returns the label.
    fn blank(&mut self) -> Result<&'a str, SyntaxError> {
        if self.b.get(self.pos + 1) != Some(&b':') {
            return Err(self.err("expected '_:' of a blank node"));
        }
        let start = self.pos + 2;
        let mut p = start;
        while let Some(&ch) = self.b.get(p) {
            if ch.is_ascii_alphanumeric() || matches!(ch, b'_' | b'-' | b'.') || ch >= 0x80 {
                p += 1;
            } else {
                break;
            }
        }
        // A label cannot end with '.': a trailing dot is the statement's terminator.
        while p > start && self.b[p - 1] == b'.' {
            p -= 1;
        }
        if p == start || matches!(self.b[start], b'-' | b'.') {
            return Err(self.err_at(start, "invalid blank node label"));
        }
        self.pos = p;
        Ok(&self.s[start..p])
    }

    /// `"literal"` with an optional `@lang` or `^^<datatype>` at `pos`.
    fn literal(&mut self) -> Result<Term<'a>, SyntaxError> {
        let start = self.pos + 1;
        let mut i = start;
        let end = loop {
            let Some(k) = memchr3(b'"', b'\\', b'\r', &self.b[i..]) else {
                return Err(self.err("unterminated literal"));
            };
            let j = i + k;
            match self.b[j] {
                b'"' => break j,
                b'\r' => return Err(self.err_at(j, "raw carriage return in literal")),
                _ => match self.b.get(j + 1) {
                    Some(b't' | b'b' | b'n' | b'r' | b'f' | b'"' | b'\'' | b'\\') => i = j + 2,
                    Some(b'u' | b'U') => match hex_escape(&self.b[j..]) {
                        Some(n) => i = j + n,
                        None => return Err(self.err_at(j, "invalid \\u escape in literal")),
                    },
                    _ => return Err(self.err_at(j, "invalid escape in literal")),
                },
            }
        };
        let value = &self.s[start..end];
        self.pos = end + 1;
        match self.peek() {
            Some(b'@') => {
                let ls = self.pos + 1;
                let mut p = ls;
                while self.b.get(p).is_some_and(u8::is_ascii_alphabetic) {
                    p += 1;
                }
                if p == ls {
                    return Err(self.err_at(ls, "empty language tag"));
                }
                while self.b.get(p) == Some(&b'-') {
                    let q = p + 1;
                    let mut r = q;
                    while self.b.get(r).is_some_and(u8::is_ascii_alphanumeric) {
                        r += 1;
                    }
                    if r == q {
                        return Err(self.err_at(q, "invalid language tag"));
                    }
                    p = r;
                }
                self.pos = p;
                Ok(Term::Literal {
                    value,
                    lang: Some(&self.s[ls..p]),
                    datatype: None,
                })
            }
            Some(b'^') => {
                if self.b.get(self.pos + 1) != Some(&b'^')
                    || self.b.get(self.pos + 2) != Some(&b'<')
                {
                    return Err(self.err("expected '^^<' of a datatype"));
                }
                self.pos += 2;
                let datatype = self.iri()?;
                Ok(Term::Literal {
                    value,
                    lang: None,
                    datatype: Some(datatype),
                })
            }
            _ => Ok(Term::Literal {
                value,
                lang: None,
                datatype: None,
            }),
        }
    }
}

/// What a byte is inside an IRIREF.
#[derive(Clone, Copy)]
enum IriByte {
    Plain,
    /// `\\`, which must start a `\\u`/`\\U` escape.
    Escape,
    /// Control characters, space and `<>"{}|^``.
    Invalid,
}

/// [`IriByte`] of every byte value, looked up once per byte of an IRI's local part.
const IRI_BYTES: [IriByte; 256] = {
    let mut t = [IriByte::Plain; 256];
    let mut b = 0;
    while b <= 0x20 {
        t[b] = IriByte::Invalid;
        b += 1;
    }
    let bad = b"<>\"{}|^`";
    let mut k = 0;
    while k < bad.len() {
        t[bad[k] as usize] = IriByte::Invalid;
        k += 1;
    }
    t[b'\\' as usize] = IriByte::Escape;
    t
};

/// Whether an IRI body starts with a scheme `[A-Za-z][A-Za-z0-9+.-]*:`.
fn has_scheme(body: &[u8]) -> bool {
    match body.first() {
        Some(c) if c.is_ascii_alphabetic() => {}
        _ => return false,
    }
    for &c in &body[1..] {
        match c {
            b':' => return true,
            c if c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.') => {}
            _ => return false,
        }
    }
    false
}

/// Length of a valid `\uXXXX` / `\UXXXXXXXX` escape (naming a Unicode scalar value) at the
/// start of `b`.
fn hex_escape(b: &[u8]) -> Option<usize> {
    let digits = match b.get(1) {
        Some(b'u') => 4,
        Some(b'U') => 8,
        _ => return None,
    };
    let hex = b.get(2..2 + digits)?;
    decode_hex(hex).map(|_| 2 + digits)
}

fn decode_hex(hex: &[u8]) -> Option<char> {
    let mut v: u32 = 0;
    for &h in hex {
        v = v * 16 + (h as char).to_digit(16)?;
    }
    char::from_u32(v)
}

/// Decodes the N-Triples escapes of a validated literal or IRI (borrowed when it has none).
pub(super) fn unescape(raw: &str) -> Cow<'_, str> {
    let Some(first) = memchr(b'\\', raw.as_bytes()) else {
        return Cow::Borrowed(raw);
    };
    let b = raw.as_bytes();
    let mut out = String::with_capacity(raw.len());
    let mut done = 0;
    let mut i = first;
    loop {
        out.push_str(&raw[done..i]);
        let (ch, n) = match b.get(i + 1) {
            Some(b't') => ('\t', 2),
            Some(b'b') => ('\u{8}', 2),
            Some(b'n') => ('\n', 2),
            Some(b'r') => ('\r', 2),
            Some(b'f') => ('\u{c}', 2),
            Some(b'"') => ('"', 2),
            Some(b'\'') => ('\'', 2),
            Some(b'\\') => ('\\', 2),
            Some(b'u') => (hex_char(b, i + 2, 4), 6),
            Some(b'U') => (hex_char(b, i + 2, 8), 10),
            // Unreachable for validated input; kept literally.
            _ => ('\\', 1),
        };
        out.push(ch);
        i = (i + n).min(b.len());
        done = i;
        match memchr(b'\\', &b[i..]) {
            Some(k) => i += k,
            None => break,
        }
    }
    out.push_str(&raw[done..]);
    Cow::Owned(out)
}

fn hex_char(b: &[u8], at: usize, digits: usize) -> char {
    b.get(at..at + digits)
        .and_then(decode_hex)
        .unwrap_or('\u{FFFD}')
}
