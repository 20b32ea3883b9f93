//! grace on std.
