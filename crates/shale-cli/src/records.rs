//! The record formats `dump` writes and `load` reads (and `scan` prints): one key/value pair per
//! line, keys and values in the chosen [`Encoding`].
//!
//! ```text
//! tsv:   KEY <TAB> VALUE <LF>            (keys-only output: KEY <LF>)
//! jsonl: {"key":"KEY","value":"VALUE"} <LF>   (keys-only output: {"key":"KEY"})
//! ```
//! Encoded keys and values never hold a tab or a line feed, so the lines split unambiguously.
//! On input, a final line without a line feed is accepted and empty lines are skipped; a line
//! with no tab or more than one, or a JSON line that is not an object with string `key` and
//! `value` members, is an error naming the line number.
//!
//! Thread-safety: a reader belongs to one thread.

use std::io::{BufRead, Write};

use crate::encoding::Encoding;
use crate::failure::{CliResult, Failure};

/// A record format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `KEY<TAB>VALUE` lines.
    Tsv,
    /// One JSON object per line: `{"key": "...", "value": "..."}`.
    Jsonl,
}

/// Writes one record; `value` is `None` for keys-only output.
pub fn write_record(
    out: &mut dyn Write,
    format: Format,
    encoding: Encoding,
    key: &[u8],
    value: Option<&[u8]>,
) -> std::io::Result<()> {
    let key = encoding.encode(key);
    match format {
        Format::Tsv => match value {
            Some(v) => writeln!(out, "{key}\t{}", encoding.encode(v)),
            None => writeln!(out, "{key}"),
        },
        Format::Jsonl => {
            let mut object = serde_json::Map::new();
            object.insert("key".into(), serde_json::Value::String(key));
            if let Some(v) = value {
                object.insert(
                    "value".into(),
                    serde_json::Value::String(encoding.encode(v)),
                );
            }
            writeln!(out, "{}", serde_json::Value::Object(object))
        }
    }
}

/// Reads records from a stream.
pub struct RecordReader<R> {
    input: R,
    format: Format,
    encoding: Encoding,
    line: Vec<u8>,
    line_number: u64,
    bytes_read: u64,
}

impl<R: BufRead> RecordReader<R> {
    /// A reader of `format` records whose keys and values are in `encoding`.
    pub fn new(input: R, format: Format, encoding: Encoding) -> Self {
        RecordReader {
            input,
            format,
            encoding,
            line: Vec::new(),
            line_number: 0,
            bytes_read: 0,
        }
    }

    /// The number of the line last read (1-based).
    pub fn line_number(&self) -> u64 {
        self.line_number
    }

    /// Bytes of input consumed so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// The next `(key, value)`, or `None` at the end of the input.
    pub fn next_record(&mut self) -> CliResult<Option<(Vec<u8>, Vec<u8>)>> {
        loop {
            self.line.clear();
            let n = self.input.read_until(b'\n', &mut self.line).map_err(|e| {
                Failure::new(crate::failure::Exit::Io, format!("reading input: {e}"))
            })?;
            if n == 0 {
                return Ok(None);
            }
            self.bytes_read += n as u64;
            self.line_number += 1;
            if self.line.last() == Some(&b'\n') {
                self.line.pop();
            }
            if self.line.is_empty() {
                continue;
            }
            return self.parse_line().map(Some);
        }
    }

    fn bad(&self, what: String) -> Failure {
        Failure::usage(format!("input line {}: {what}", self.line_number))
    }

    fn decode_field(&self, field: &str, text: &[u8]) -> CliResult<Vec<u8>> {
        self.encoding.decode(text).map_err(|e| {
            self.bad(format!(
                "the {field} is not {} ({e}); load with the encoding the data was dumped with \
                 (--hex, --base64 or neither)",
                self.encoding.name()
            ))
        })
    }

    fn parse_line(&self) -> CliResult<(Vec<u8>, Vec<u8>)> {
        match self.format {
            Format::Tsv => {
                let mut fields = self.line.split(|&b| b == b'\t');
                let key = fields.next().unwrap_or(&[]);
                let Some(value) = fields.next() else {
                    return Err(self.bad(
                        "expected KEY<TAB>VALUE, found no tab (is the input JSON lines? \
                         then pass --format jsonl)"
                            .into(),
                    ));
                };
                if fields.next().is_some() {
                    return Err(self.bad(
                        "expected KEY<TAB>VALUE, found more than one tab (tabs inside keys \
                         and values must be written as \\t)"
                            .into(),
                    ));
                }
                Ok((
                    self.decode_field("key", key)?,
                    self.decode_field("value", value)?,
                ))
            }
            Format::Jsonl => {
                let parsed: serde_json::Value = serde_json::from_slice(&self.line)
                    .map_err(|e| self.bad(format!("not valid JSON: {e}")))?;
                let field = |name: &str| -> CliResult<Vec<u8>> {
                    match parsed.get(name) {
                        Some(serde_json::Value::String(s)) => self.decode_field(name, s.as_bytes()),
                        Some(_) => Err(self.bad(format!("member \"{name}\" is not a string"))),
                        None => Err(self.bad(format!(
                            "expected an object with string members \"key\" and \"value\", \
                             \"{name}\" is missing"
                        ))),
                    }
                };
                Ok((field("key")?, field("value")?))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_in_both_formats() {
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (b"".to_vec(), b"".to_vec()),
            (b"a\tb\nc".to_vec(), (0..=255u8).collect()),
            ("ключ".as_bytes().to_vec(), b"\\x00".to_vec()),
        ];
        for format in [Format::Tsv, Format::Jsonl] {
            for encoding in [Encoding::Text, Encoding::Hex, Encoding::Base64] {
                let mut out = Vec::new();
                for (k, v) in &pairs {
                    write_record(&mut out, format, encoding, k, Some(v)).expect("write");
                }
                let mut reader = RecordReader::new(&out[..], format, encoding);
                let mut got = Vec::new();
                while let Some(r) = reader.next_record().expect("read") {
                    got.push(r);
                }
                assert_eq!(got, pairs, "{format:?} {encoding:?}");
            }
        }
    }

    #[test]
    fn malformed_lines_name_their_line_number() {
        let input = b"a\tb\n\nno tab here\n";
        let mut reader = RecordReader::new(&input[..], Format::Tsv, Encoding::Text);
        assert!(reader.next_record().expect("first").is_some());
        let e = reader.next_record().expect_err("third line is bad");
        assert!(e.message.contains("line 3"), "{}", e.message);
        let mut reader = RecordReader::new(&b"{\"key\":\"a\"}"[..], Format::Jsonl, Encoding::Text);
        let e = reader.next_record().expect_err("missing value");
        assert!(e.message.contains("\"value\" is missing"), "{}", e.message);
    }
}
