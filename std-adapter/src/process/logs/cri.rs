//! The lines of a container log file, in the kubelet's CRI log format:
//! each record is the time the agent read the output (RFC 3339 with
//! nanoseconds, UTC), the stream, a tag and the text:
//!
//! ```text
//! 2026-11-28T01:45:21.123456789Z stdout F hello
//! 2026-11-28T01:45:21.200000000Z stdout P a line without its end yet
//! 2026-11-28T01:45:22.000000000Z stdout F , and its end
//! ```
//!
//! `F` ends a line of output; `P` is part of one that goes on in the next
//! record (its newline is the record's, not the output's). A container's
//! stdout and stderr are one pipe, so every record says `stdout`, as the
//! kubelet logs a container with a terminal. Files written before this
//! format (lines without the prefix) read as they are, with no time: a
//! [`Decoder`] takes both, even mixed.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A time in a log record: seconds and nanoseconds since the Unix epoch.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct LogTime {
    /// Seconds since 1970-01-01T00:00:00Z.
    pub secs: i64,
    /// Nanoseconds within the second.
    pub nanos: u32,
}

impl LogTime {
    /// `t` as a log time (before the epoch: the epoch).
    pub fn of(t: SystemTime) -> LogTime {
        let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        LogTime {
            secs: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
            nanos: since.subsec_nanos(),
        }
    }

    /// This time less `d` (`--since`), saturating.
    pub fn minus(self, d: Duration) -> LogTime {
        let nanos = i128::from(self.secs)
            .saturating_mul(1_000_000_000)
            .saturating_add(i128::from(self.nanos))
            .saturating_sub(i128::try_from(d.as_nanos()).unwrap_or(i128::MAX));
        LogTime {
            secs: i64::try_from(nanos.div_euclid(1_000_000_000)).unwrap_or(i64::MIN),
            nanos: u32::try_from(nanos.rem_euclid(1_000_000_000)).unwrap_or(0),
        }
    }

    /// RFC 3339 with nine digits of nanoseconds, UTC
    /// (`2026-11-28T01:45:21.123456789Z`), as the kubelet writes it.
    pub fn rfc3339_nanos(self) -> String {
        let days = self.secs.div_euclid(86_400);
        let of_day = self.secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:09}Z",
            of_day.div_euclid(3600),
            of_day.rem_euclid(3600).div_euclid(60),
            of_day.rem_euclid(60),
            self.nanos
        )
    }

    /// Reads an RFC 3339 time: `2026-11-28T01:45:21Z`, with a fraction of
    /// a second or not, `Z` or an offset (`+02:00`). `None` otherwise.
    #[allow(
        clippy::arithmetic_side_effects,
        reason = "every field is two or four digits: far from overflowing"
    )]
    pub fn parse(text: &str) -> Option<LogTime> {
        let b = text.as_bytes();
        let num = |from: usize, len: usize| -> Option<i64> {
            let digits = text.get(from..from.checked_add(len)?)?;
            digits
                .bytes()
                .all(|c| c.is_ascii_digit())
                .then(|| digits.parse().ok())?
        };
        let sep = |at: usize, want: &[u8]| b.get(at).is_some_and(|c| want.contains(c));
        if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt") && sep(13, b":") && sep(16, b":")) {
            return None;
        }
        let (y, m, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
        let (hh, mm, ss) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
        if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
            return None;
        }
        let mut rest = text.get(19..)?;
        let mut nanos = 0_u32;
        if let Some(fraction) = rest.strip_prefix('.') {
            let len = fraction.bytes().take_while(u8::is_ascii_digit).count();
            if len == 0 {
                return None;
            }
            let digits = fraction.get(..len.min(9))?;
            let value: u32 = digits.parse().ok()?;
            let scale =
                10_u32.checked_pow(u32::try_from(9_usize.saturating_sub(digits.len())).ok()?)?;
            nanos = value.checked_mul(scale)?;
            rest = fraction.get(len..)?;
        }
        let offset = match rest {
            "Z" | "z" => 0,
            _ => {
                let sign = match rest.as_bytes().first()? {
                    b'+' => 1,
                    b'-' => -1,
                    _ => return None,
                };
                if rest.len() != 6 || rest.as_bytes().get(3) != Some(&b':') {
                    return None;
                }
                let (oh, om) = (
                    num(text.len().checked_sub(5)?, 2)?,
                    num(text.len().checked_sub(2)?, 2)?,
                );
                sign * (oh * 3600 + om * 60)
            }
        };
        let secs = days_from_civil(y, m, d)
            .checked_mul(86_400)?
            .checked_add(hh * 3600 + mm * 60 + ss)?
            .checked_sub(offset)?;
        Some(LogTime { secs, nanos })
    }
}

/// The days since 1970-01-01 of a civil date (H. Hinnant's algorithm).
#[allow(
    clippy::arithmetic_side_effects,
    reason = "y, m and d are checked to be four-digit, 1..=12 and 1..=31 by the callers"
)]
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day since 1970-01-01 (H. Hinnant's algorithm).
#[allow(
    clippy::arithmetic_side_effects,
    reason = "days comes from an i64 of seconds divided by 86 400: far from overflowing"
)]
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// `data` (output read from a container's pipe at `now`) as records:
/// a record per line, and a `P` record for a last line without its end.
pub fn encode(now: LogTime, data: &[u8], out: &mut Vec<u8>) {
    let stamp = now.rfc3339_nanos();
    for line in data.split_inclusive(|b| *b == b'\n') {
        encode_line(&stamp, line, out);
    }
}

/// The record of one `line` (its newline, if it has one, last) at the
/// time `stamp` ([`LogTime::rfc3339_nanos`]).
pub fn encode_line(stamp: &str, line: &[u8], out: &mut Vec<u8>) {
    let (text, tag) = match line.strip_suffix(b"\n") {
        Some(text) => (text, "F"),
        None => (line, "P"),
    };
    out.extend_from_slice(stamp.as_bytes());
    out.extend_from_slice(b" stdout ");
    out.extend_from_slice(tag.as_bytes());
    out.push(b' ');
    out.extend_from_slice(text);
    out.push(b'\n');
}

/// How long the record of `line` is ([`encode_line`]).
pub fn record_len(stamp: &str, line: &[u8]) -> usize {
    let newline = usize::from(!line.ends_with(b"\n"));
    stamp
        .len()
        .saturating_add(" stdout F ".len())
        .saturating_add(line.len())
        .saturating_add(newline)
}

/// A line of output, read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// When the agent read its first part; `None` in a file written
    /// before records had times.
    pub time: Option<LogTime>,
    /// The text, with its newline (none for the last line of output that
    /// did not end one).
    pub text: Vec<u8>,
}

/// Reads records (and lines of the older format) back into lines of
/// output, fed a piece at a time: what a file holds, then what a
/// follower reads as it grows.
#[derive(Debug, Default)]
pub struct Decoder {
    /// A record not ended yet (read in the middle of its write).
    pending: Vec<u8>,
    /// The parts of a line not ended yet (`P` records), and the time of
    /// the first.
    partial: Option<LogLine>,
}

impl Decoder {
    /// A decoder at the start of a log.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// The lines `bytes` completes.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<LogLine> {
        let mut lines = Vec::new();
        self.pending.extend_from_slice(bytes);
        let mut consumed = 0_usize;
        for record in self.pending.split_inclusive(|b| *b == b'\n') {
            if record.last() != Some(&b'\n') {
                break;
            }
            consumed = consumed.saturating_add(record.len());
            if let Some(line) = Self::record(&mut self.partial, record) {
                lines.push(line);
            }
        }
        self.pending.drain(..consumed);
        lines
    }

    /// What is left at the end of the log: a record or line without its
    /// newline, a line whose end was never written.
    pub fn finish(&mut self) -> Vec<LogLine> {
        let rest = std::mem::take(&mut self.pending);
        let mut lines = Vec::new();
        if !rest.is_empty()
            && let Some(line) = Self::record(&mut self.partial, &rest)
        {
            lines.push(line);
        }
        lines.extend(self.partial.take());
        lines
    }

    /// One record (with its newline, but for the last of a log): the line
    /// it ends, if any.
    fn record(partial: &mut Option<LogLine>, record: &[u8]) -> Option<LogLine> {
        let Some((time, full, text)) = parse_record(record) else {
            // The older format: the line as it is, no time. A line begun
            // in parts ends first.
            let before = partial.take();
            let line = LogLine {
                time: None,
                text: record.to_vec(),
            };
            return match before {
                Some(mut parts) => {
                    parts.text.extend_from_slice(&line.text);
                    Some(parts)
                }
                None => Some(line),
            };
        };
        let line = partial.get_or_insert_with(|| LogLine {
            time: Some(time),
            text: Vec::new(),
        });
        line.text.extend_from_slice(text);
        if full {
            line.text.push(b'\n');
            return partial.take();
        }
        None
    }
}

/// A record's time, whether it ends a line, and its text (without the
/// record's newline); `None` for a line of the older format.
fn parse_record(record: &[u8]) -> Option<(LogTime, bool, &[u8])> {
    let body = record.strip_suffix(b"\n").unwrap_or(record);
    let mut fields = body.splitn(4, |b| *b == b' ');
    let time = LogTime::parse(std::str::from_utf8(fields.next()?).ok()?)?;
    if !matches!(fields.next()?, b"stdout" | b"stderr") {
        return None;
    }
    let full = match fields.next()? {
        b"F" => true,
        b"P" => false,
        _ => return None,
    };
    Some((time, full, fields.next().unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_back_as_written_and_as_kubernetes_writes_them() {
        let cases = [
            ("1970-01-01T00:00:00.000000000Z", 0, 0),
            ("2026-11-28T01:45:21.123456789Z", 1_795_830_321, 123_456_789),
            ("2000-02-29T23:59:59.000000001Z", 951_868_799, 1),
        ];
        for (text, secs, nanos) in cases {
            let t = LogTime { secs, nanos };
            assert_eq!(t.rfc3339_nanos(), text);
            assert_eq!(LogTime::parse(text), Some(t), "{text}");
        }
        let plain = LogTime::parse("2026-11-28T01:45:21Z");
        assert_eq!(plain.map(|t| t.secs), Some(1_795_830_321));
        let offset = LogTime::parse("2026-11-28T03:45:21.5+02:00");
        assert_eq!(
            offset,
            Some(LogTime {
                secs: 1_795_830_321,
                nanos: 500_000_000
            })
        );
        for bad in [
            "2026-11-28",
            "2026-13-28T01:45:21Z",
            "2026-11-28T01:45:21",
            "x",
        ] {
            assert_eq!(LogTime::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn records_decode_to_the_output_written_with_parts_joined_and_old_lines_kept() {
        let t = LogTime {
            secs: 1_795_830_321,
            nanos: 5,
        };
        let mut file = b"an old line\n".to_vec();
        encode(t, b"one\ntwo", &mut file);
        encode(t.minus(Duration::from_secs(0)), b" more\nlast", &mut file);
        let mut decoder = Decoder::new();
        // Fed a byte at a time: a follower may read in the middle of a
        // record.
        let mut lines = Vec::new();
        for b in &file {
            lines.extend(decoder.feed(std::slice::from_ref(b)));
        }
        lines.extend(decoder.finish());
        let texts: Vec<&[u8]> = lines.iter().map(|l| l.text.as_slice()).collect();
        assert_eq!(
            texts,
            [&b"an old line\n"[..], b"one\n", b"two more\n", b"last"]
        );
        assert_eq!(lines[0].time, None);
        assert_eq!(lines[1].time, Some(t));
    }

    #[test]
    fn minus_goes_back_across_seconds() {
        let t = LogTime {
            secs: 10,
            nanos: 100,
        };
        assert_eq!(
            t.minus(Duration::from_nanos(200)),
            LogTime {
                secs: 9,
                nanos: 999_999_900
            }
        );
    }
}
