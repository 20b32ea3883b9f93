//! Numbers and text as the picture writes them: short finite numbers,
//! time labels, XML escaping, lane ids.

/// A coordinate: two decimals at most, never `-0`, never NaN or infinite.
pub(super) fn num(v: f64) -> String {
    if !v.is_finite() {
        return "0".to_string();
    }
    let s = format!("{:.2}", v + 0.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" || s.is_empty() {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// A large magnitude in short scientific notation (`9.2e18`).
pub(super) fn sci(v: f64) -> String {
    let s = format!("{v:.1e}");
    match s.split_once('e') {
        Some((m, e)) => format!("{}e{e}", m.trim_end_matches('0').trim_end_matches('.')),
        None => s,
    }
}

/// A count of seconds, short even when absurd.
pub(super) fn count_label(seconds: i64) -> String {
    if seconds.unsigned_abs() >= 1_000_000 {
        format!("{} s", sci(seconds as f64))
    } else {
        format!("{seconds} s")
    }
}

/// Milliseconds as seconds: `30 s`, `11.5 s`, `2.5e11 s`.
pub(super) fn seconds_label(ms: i64) -> String {
    if ms.unsigned_abs() >= 1_000_000_000 {
        return format!("{} s", sci(ms as f64 / 1000.0));
    }
    format!("{} s", plain_seconds(ms))
}

/// Unix milliseconds as seconds, in full: `1000`, `1000.5`.
pub(super) fn plain_seconds(ms: i64) -> String {
    let whole = ms.div_euclid(1000);
    match ms.rem_euclid(1000) {
        0 => whole.to_string(),
        frac => format!("{whole}.{}", format!("{frac:03}").trim_end_matches('0')),
    }
}

/// A time relative to t = 0: `+30 s`.
pub(super) fn relative_label(ms: i64) -> String {
    format!("+{}", seconds_label(ms.max(0)))
}

/// A tick label: `+5 s`, `+0.2 s`, `+2e11 s`.
pub(super) fn tick_label(ms: f64, step_ms: f64) -> String {
    let s = ms / 1000.0;
    if s.abs() >= 1e6 {
        format!("+{} s", sci(s))
    } else if step_ms < 1000.0 {
        format!("+{s:.1} s")
    } else {
        format!("+{s:.0} s")
    }
}

/// Text made safe for XML: escaped, and without characters XML 1.0 forbids.
pub(super) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(' '),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {
                out.push('\u{fffd}');
            }
            c => out.push(c),
        }
    }
    out
}

/// A name cut to `max` characters, with an ellipsis when cut.
pub(super) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

pub(super) fn text_width(s: &str, char_w: f64) -> f64 {
    s.chars().count() as f64 * char_w
}

/// An id made of safe characters, unique among `taken`.
pub(super) fn lane_id(name: &str, index: usize, taken: &[String]) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let base = match cleaned.is_empty() {
        true => format!("lane-{index}"),
        false => format!("lane-{cleaned}"),
    };
    let (mut id, mut n) = (base.clone(), index);
    while taken.contains(&id) {
        id = format!("{base}-{n}");
        n = n.saturating_add(1);
    }
    id
}

/// Tooltip markup: `<title>` with the text escaped.
pub(super) fn title(text: &str) -> String {
    format!("<title>{}</title>", esc(text))
}
