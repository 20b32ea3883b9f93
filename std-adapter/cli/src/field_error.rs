//! JSON documents read field by field (object files): a refusal names the
//! field, and the line and column where the JSON reader knows them.

use std::fmt;

/// Why a JSON document (an object file) was refused: the field, where it
/// is, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field, as a path (`spec.containers[0].name`); empty for the
    /// whole document.
    pub field: String,
    /// Line and column in the file, when known.
    pub position: Option<(usize, usize)>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = if self.field.is_empty() || self.field == "." {
            "document"
        } else {
            &self.field
        };
        write!(f, "field `{field}`")?;
        if let Some((line, column)) = self.position {
            write!(f, " (line {line}, column {column})")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for FieldError {}

impl FieldError {
    /// `message` about `field`, at no known position (a check made after
    /// the document was read).
    pub fn at(field: impl Into<String>, message: impl std::fmt::Display) -> Self {
        FieldError {
            field: field.into(),
            position: None,
            message: message.to_string(),
        }
    }
}

/// Deserializes one JSON document; an error names the field's path, line
/// and column.
pub fn from_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, FieldError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let position = (inner.line() > 0).then(|| (inner.line(), inner.column()));
        FieldError {
            field: path,
            position,
            message: strip_position(&inner.to_string()),
        }
    })?;
    de.end().map_err(|e| FieldError {
        field: String::new(),
        position: Some((e.line(), e.column())),
        message: strip_position(&e.to_string()),
    })?;
    Ok(value)
}

/// serde_json appends " at line L column C"; the position is shown apart.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}
