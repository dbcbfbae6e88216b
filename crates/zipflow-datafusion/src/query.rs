//! SQL text over zipflow tables: paths quoted in FROM (`FROM 'lineitem.zf'`) as tables.

use std::sync::Arc;

use datafusion::common::TableReference;
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer, Word};

use crate::ZfTable;

/// Rewrites each single-quoted string that stands as a table in FROM or JOIN (`FROM
/// 'lineitem.zf'`) into a quoted identifier, and returns the new text and those paths.
pub fn quoted_tables(sql: &str) -> Result<(String, Vec<String>)> {
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize()
        .map_err(|e| DataFusionError::Plan(format!("the query does not parse: {e}")))?;
    let mut paths = Vec::new();
    let mut out = String::with_capacity(sql.len());
    // Whether each open parenthesis level is inside a FROM clause (ON and USING conditions
    // included: at their own level a comma can only start another table), and the token
    // before, skipping whitespace.
    let mut in_from = vec![false];
    let mut previous: Option<&Token> = None;
    for token in &tokens {
        match token {
            Token::LParen => in_from.push(false),
            Token::RParen if in_from.len() > 1 => {
                in_from.pop();
            }
            Token::Word(w) => {
                if let Some(level) = in_from.last_mut() {
                    match w.keyword {
                        Keyword::FROM | Keyword::JOIN => *level = true,
                        Keyword::SELECT
                        | Keyword::WHERE
                        | Keyword::GROUP
                        | Keyword::ORDER
                        | Keyword::HAVING
                        | Keyword::LIMIT
                        | Keyword::UNION
                        | Keyword::INTERSECT
                        | Keyword::EXCEPT
                        | Keyword::WINDOW
                        | Keyword::QUALIFY => *level = false,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        let table_position = match previous {
            Some(Token::Word(w)) => matches!(w.keyword, Keyword::FROM | Keyword::JOIN),
            Some(Token::Comma) => in_from.last().copied().unwrap_or(false),
            _ => false,
        };
        match token {
            Token::SingleQuotedString(path) if table_position => {
                if path.contains('"') {
                    return Err(DataFusionError::Plan(format!(
                        "table path `{path}`: a path with `\"` cannot be named in FROM; name the table instead"
                    )));
                }
                if !paths.contains(path) {
                    paths.push(path.clone());
                }
                let ident = Token::Word(Word {
                    value: path.clone(),
                    quote_style: Some('"'),
                    keyword: Keyword::NoKeyword,
                });
                out.push_str(&ident.to_string());
            }
            t => out.push_str(&t.to_string()),
        }
        if !matches!(token, Token::Whitespace(_)) {
            previous = Some(token);
        }
    }
    Ok((out, paths))
}

/// Opens each .zf path that `sql` quotes in FROM or JOIN as a [`ZfTable`] registered in `ctx`
/// under its path, and returns the query rewritten to name them and the paths registered.
/// A path already registered is left as it is.
pub fn register_quoted_tables(ctx: &SessionContext, sql: &str) -> Result<(String, Vec<String>)> {
    let (text, paths) = quoted_tables(sql)?;
    for path in &paths {
        let name = TableReference::bare(path.as_str());
        if ctx.table_exist(name.clone())? {
            continue;
        }
        let table = ZfTable::open(path)
            .map_err(|e| DataFusionError::Plan(format!("table '{path}': {e}")))?;
        ctx.register_table(name, Arc::new(table))?;
    }
    Ok((text, paths))
}

/// A multi-threaded runtime of `threads` workers (0: one per core) to run queries on, and
/// its worker count (the session's target partitions).
pub fn runtime(threads: usize) -> std::io::Result<(tokio::runtime::Runtime, usize)> {
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, usize::from)
    } else {
        threads
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?;
    Ok((runtime, threads))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_paths_in_from_and_join_become_tables() {
        let (sql, paths) = quoted_tables(
            "SELECT 'a.zf', x FROM 'data/l.zf' l JOIN 'o.zf' o ON l.k = o.k, 'p.zf' \
             WHERE s IN ('q.zf', 'r.zf') AND k IN (SELECT k FROM 's.zf')",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(paths, ["data/l.zf", "o.zf", "p.zf", "s.zf"]);
        assert_eq!(
            sql,
            "SELECT 'a.zf', x FROM \"data/l.zf\" l JOIN \"o.zf\" o ON l.k = o.k, \"p.zf\" \
             WHERE s IN ('q.zf', 'r.zf') AND k IN (SELECT k FROM \"s.zf\")"
        );
    }
}
