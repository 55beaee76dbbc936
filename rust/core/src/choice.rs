//! String names of the engine's option enums (`"random"`, `"nested"`, ...): one table per enum,
//! parsed by `FromStr` here so every binding refuses a bad name with the same message.

use crate::{Error, Result};

/// The entry of `table` named `name`, or an `InvalidArgument` error naming `what` and listing
/// the valid names.
pub(crate) fn parse_choice<T: Copy>(what: &str, name: &str, table: &[(&str, T)]) -> Result<T> {
    table
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, v)| v)
        .ok_or_else(|| {
            let valid: Vec<String> = table.iter().map(|(n, _)| format!("'{n}'")).collect();
            Error::invalid(format!(
                "unknown {what} {name:?} (expected one of {})",
                valid.join(", ")
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::parse_choice;

    #[test]
    fn finds_a_name_and_lists_the_valid_ones_otherwise() {
        let table = [("a", 1), ("b", 2)];
        assert_eq!(parse_choice("letter", "b", &table).unwrap(), 2);
        let err = parse_choice("letter", "c", &table).unwrap_err().to_string();
        assert_eq!(err, "unknown letter \"c\" (expected one of 'a', 'b')");
    }
}
