//! Errors.
//!
//! One structured error type for the library crates. Decoders report *what* is wrong with the
//! bytes they were given; the layers above add *where* (file, column, chunk) with
//! [`Error::at_column`], [`Error::at_chunk`] and [`Error::in_file`], so the message a user sees
//! names all of it in one line.

use std::fmt;
use std::path::PathBuf;

/// Result with zipflow's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where in a file something went wrong. Every part is optional: a decoder knows none of them,
/// the file reader fills them in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    /// The file being read or written.
    pub file: Option<PathBuf>,
    /// Column name.
    pub column: Option<String>,
    /// Chunk index within the column.
    pub chunk: Option<u32>,
}

impl Location {
    fn is_empty(&self) -> bool {
        self.file.is_none() && self.column.is_none() && self.chunk.is_none()
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        if let Some(file) = &self.file {
            write!(f, "{}", file.display())?;
            sep = ", ";
        }
        if let Some(column) = &self.column {
            write!(f, "{sep}column `{column}`")?;
            sep = ", ";
        }
        if let Some(chunk) = self.chunk {
            write!(f, "{sep}chunk {chunk}")?;
        }
        Ok(())
    }
}

/// zipflow's error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bytes that do not decode: truncated, bit-flipped, or not a zipflow file at all.
    #[error("{}corrupt data: {what}", prefix(.loc))]
    Corrupt {
        /// Where.
        loc: Location,
        /// What is wrong, in words.
        what: String,
    },
    /// A checksum did not match: the bytes changed after they were written.
    #[error("{}checksum mismatch in {part}: stored {stored:#018x}, computed {computed:#018x}", prefix(.loc))]
    Checksum {
        /// Where.
        loc: Location,
        /// Which part of the file (a chunk, the footer).
        part: String,
        /// The checksum the file holds.
        stored: u64,
        /// The checksum of the bytes read.
        computed: u64,
    },
    /// Something zipflow does not implement (yet): a type, a plan for a type, a file version.
    #[error("{}unsupported: {what}", prefix(.loc))]
    Unsupported {
        /// Where.
        loc: Location,
        /// What, in words.
        what: String,
    },
    /// A plan that does not parse, or does not fit the stream it was given.
    #[error("{}invalid plan `{plan}`: {reason}", prefix(.loc))]
    Plan {
        /// Where.
        loc: Location,
        /// The plan, as text.
        plan: String,
        /// Why it is rejected.
        reason: String,
    },
    /// Invalid input data or arguments (not corrupt bytes: e.g. a bad CSV field).
    #[error("{}invalid input: {what}", prefix(.loc))]
    Invalid {
        /// Where.
        loc: Location,
        /// What, in words.
        what: String,
    },
    /// An I/O error on a path.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The path being read or written.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// An error from a library zipflow builds on (Arrow, Parquet, CSV), with its location.
    #[error("{}{what}: {source}", prefix(.loc))]
    External {
        /// Where.
        loc: Location,
        /// What zipflow was doing.
        what: String,
        /// The library's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

fn prefix(loc: &Location) -> String {
    if loc.is_empty() {
        String::new()
    } else {
        format!("{loc}: ")
    }
}

impl Error {
    /// A [`Error::Corrupt`] with no location yet.
    pub fn corrupt(what: impl Into<String>) -> Self {
        Error::Corrupt {
            loc: Location::default(),
            what: what.into(),
        }
    }

    /// An [`Error::Unsupported`] with no location yet.
    pub fn unsupported(what: impl Into<String>) -> Self {
        Error::Unsupported {
            loc: Location::default(),
            what: what.into(),
        }
    }

    /// An [`Error::Invalid`] with no location yet.
    pub fn invalid(what: impl Into<String>) -> Self {
        Error::Invalid {
            loc: Location::default(),
            what: what.into(),
        }
    }

    /// An [`Error::Plan`] with no location yet.
    pub fn plan(plan: impl fmt::Display, reason: impl Into<String>) -> Self {
        Error::Plan {
            loc: Location::default(),
            plan: plan.to_string(),
            reason: reason.into(),
        }
    }

    /// An [`Error::External`] wrapping a library error.
    pub fn external(
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error::External {
            loc: Location::default(),
            what: what.into(),
            source: source.into(),
        }
    }

    /// An [`Error::Io`] on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    fn loc_mut(&mut self) -> Option<&mut Location> {
        match self {
            Error::Corrupt { loc, .. }
            | Error::Checksum { loc, .. }
            | Error::Unsupported { loc, .. }
            | Error::Plan { loc, .. }
            | Error::Invalid { loc, .. }
            | Error::External { loc, .. } => Some(loc),
            Error::Io { .. } => None,
        }
    }

    /// The location, where the error has one.
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::Corrupt { loc, .. }
            | Error::Checksum { loc, .. }
            | Error::Unsupported { loc, .. }
            | Error::Plan { loc, .. }
            | Error::Invalid { loc, .. }
            | Error::External { loc, .. } => Some(loc),
            Error::Io { .. } => None,
        }
    }

    /// Names the column, unless an inner layer already did.
    pub fn at_column(mut self, column: &str) -> Self {
        if let Some(loc) = self.loc_mut() {
            loc.column.get_or_insert_with(|| column.to_string());
        }
        self
    }

    /// Names the chunk, unless an inner layer already did.
    pub fn at_chunk(mut self, chunk: u32) -> Self {
        if let Some(loc) = self.loc_mut() {
            loc.chunk.get_or_insert(chunk);
        }
        self
    }

    /// Names the file, unless an inner layer already did.
    pub fn in_file(mut self, file: impl Into<PathBuf>) -> Self {
        if let Some(loc) = self.loc_mut() {
            loc.file.get_or_insert_with(|| file.into());
        }
        self
    }
}

/// Returns [`Error::Corrupt`] from the enclosing function unless `cond` holds.
#[macro_export]
macro_rules! ensure_corrupt {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::Error::corrupt(format!($($fmt)+)));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_file_column_chunk() {
        let e = Error::corrupt("bit width 70 exceeds 64")
            .at_chunk(3)
            .at_column("l_partkey")
            .in_file("l.zf");
        assert_eq!(
            e.to_string(),
            "l.zf, column `l_partkey`, chunk 3: corrupt data: bit width 70 exceeds 64"
        );
    }

    #[test]
    fn inner_location_wins() {
        let e = Error::corrupt("x").at_chunk(1).at_chunk(2);
        assert_eq!(e.location().and_then(|l| l.chunk), Some(1));
    }
}
