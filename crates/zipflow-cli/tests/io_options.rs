//! Standard input and output as `-`, refused outputs, `--quiet` anywhere, and `sql -f`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn run(args: &[&str], dir: &Path, stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zipflow"))
        .args(args)
        .current_dir(dir)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running zipflow: {e}"));
    if let Some(bytes) = stdin {
        let mut pipe = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
        let bytes = bytes.to_vec();
        // A thread, so a large input cannot block against a full stdout pipe.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        });
    }
    child.wait_with_output().unwrap_or_else(|e| panic!("{e}"))
}

fn ok(o: Output) -> Output {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

fn err(o: &Output) -> String {
    assert!(!o.status.success(), "should have failed");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn csv(rows: usize) -> String {
    let mut s = String::from("id,x,name\n");
    for i in 0..rows {
        s += &format!("{},{}.5,\"n, {}\"\n", i * 3, i % 100, i % 41);
    }
    s
}

#[test]
fn tables_and_text_stream_through_standard_input_and_output() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path();
    let text = csv(150_000);
    std::fs::write(d.join("t.csv"), &text).unwrap_or_else(|e| panic!("{e}"));
    ok(run(&["compress", "t.csv", "-o", "file.zf"], d, None));
    ok(run(
        &["compress", "-", "--format", "csv", "-o", "piped.zf"],
        d,
        Some(text.as_bytes()),
    ));
    let from_file = ok(run(
        &["decompress", "file.zf", "-o", "-", "--format", "csv"],
        d,
        None,
    ))
    .stdout
    .clone();
    let from_pipe = ok(run(
        &["decompress", "piped.zf", "-o", "-", "--format", "csv"],
        d,
        None,
    ))
    .stdout
    .clone();
    assert!(from_file.len() > 1_000_000);
    assert_eq!(from_file, from_pipe);
    // An Arrow IPC stream out and back in.
    let arrow = ok(run(
        &["decompress", "file.zf", "-o", "-", "--format", "arrow"],
        d,
        None,
    ))
    .stdout
    .clone();
    ok(run(
        &["compress", "-", "--format", "arrow", "-o", "arrow.zf"],
        d,
        Some(&arrow),
    ));
    let back = ok(run(
        &["decompress", "arrow.zf", "-o", "-", "--format", "csv"],
        d,
        None,
    ));
    assert_eq!(back.stdout, from_file);
    // Text mode: bytes in, bytes out.
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    ok(run(
        &["compress", "--text", "-", "-o", "b.zf"],
        d,
        Some(&bytes),
    ));
    let out = ok(run(&["decompress", "b.zf", "-o", "-"], d, None));
    assert_eq!(out.stdout, bytes);
    // Parquet cannot come from a pipe; a .zf cannot go to one; `-` needs --format.
    assert!(
        err(&run(
            &["compress", "-", "--format", "parquet", "-o", "p.zf"],
            d,
            Some(b"x")
        ))
        .contains("cannot be Parquet")
    );
    assert!(err(&run(&["compress", "t.csv", "-o", "-"], d, None)).contains("standard output"));
    assert!(err(&run(&["decompress", "file.zf", "-o", "-"], d, None)).contains("--format"));
}

#[test]
fn an_output_that_is_the_input_or_a_link_is_refused() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path();
    let text = csv(2_000);
    std::fs::write(d.join("t.csv"), &text).unwrap_or_else(|e| panic!("{e}"));
    let e = err(&run(
        &["compress", "t.csv", "-o", "./t.csv", "--force"],
        d,
        None,
    ));
    assert!(e.contains("is the input too"), "{e}");
    ok(run(&["compress", "t.csv", "-o", "t.zf"], d, None));
    let e = err(&run(
        &[
            "decompress",
            "t.zf",
            "-o",
            "t.zf",
            "--force",
            "--format",
            "csv",
        ],
        d,
        None,
    ));
    assert!(e.contains("is the input too"), "{e}");
    assert_eq!(
        std::fs::read_to_string(d.join("t.csv")).unwrap_or_default(),
        text
    );
    std::os::unix::fs::symlink("t.zf", d.join("link.zf")).unwrap_or_else(|e| panic!("{e}"));
    let before = std::fs::read(d.join("t.zf")).unwrap_or_default();
    let e = err(&run(
        &[
            "compress",
            "t.csv",
            "-o",
            "link.zf",
            "--force",
            "--chunk-rows",
            "1024",
        ],
        d,
        None,
    ));
    assert!(e.contains("symbolic link"), "{e}");
    assert!(std::fs::symlink_metadata(d.join("link.zf")).is_ok_and(|m| m.file_type().is_symlink()));
    assert_eq!(std::fs::read(d.join("t.zf")).unwrap_or_default(), before);
}

#[test]
fn quiet_goes_before_or_after_the_command() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path();
    std::fs::write(d.join("t.csv"), csv(1_000)).unwrap_or_else(|e| panic!("{e}"));
    let o = ok(run(&["-q", "compress", "t.csv", "-o", "t.zf"], d, None));
    assert!(o.stderr.is_empty());
    let o = ok(run(
        &["decompress", "--quiet", "t.zf", "-o", "t2.csv"],
        d,
        None,
    ))
    .clone();
    assert!(o.stderr.is_empty());
}

#[test]
fn sql_reads_a_long_query_from_a_file_or_standard_input() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path();
    std::fs::write(d.join("t.csv"), csv(30_000)).unwrap_or_else(|e| panic!("{e}"));
    ok(run(&["compress", "t.csv", "-o", "t.zf"], d, None));
    // Every multiple of 6 below 90,000 (ids are multiples of 3 below 90,000): 15,000 rows.
    let list: Vec<String> = (0..15_000).map(|i| (i * 6).to_string()).collect();
    let query = format!(
        "SELECT count(*) AS n FROM 't.zf' WHERE id IN ({}) -- {}\n",
        list.join(", "),
        "padding ".repeat(10_000)
    );
    assert!(query.len() > 128 * 1024);
    std::fs::write(d.join("q.sql"), &query).unwrap_or_else(|e| panic!("{e}"));
    let a = ok(run(&["sql", "-f", "q.sql", "--format", "csv"], d, None));
    assert_eq!(String::from_utf8_lossy(&a.stdout), "n\n15000\n");
    let b = ok(run(
        &["sql", "-", "--format", "csv"],
        d,
        Some(query.as_bytes()),
    ))
    .clone();
    assert_eq!(a.stdout, b.stdout);
    assert!(err(&run(&["sql", "-f", "missing.sql"], d, None)).contains("missing.sql"));
}

#[test]
fn null_values_are_nulls_in_csv_input() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path();
    let text = "n,s\n1,a\nNA,b\n3,NULL\n,c\n";
    std::fs::write(d.join("t.csv"), text).unwrap_or_else(|e| panic!("{e}"));
    ok(run(
        &[
            "compress",
            "t.csv",
            "--null-values",
            "NA,NULL",
            "-o",
            "t.zf",
        ],
        d,
        None,
    ));
    let out = ok(run(
        &[
            "sql",
            "SELECT count(n), sum(n), count(s), count(*) FROM 't.zf'",
            "--format",
            "csv",
        ],
        d,
        None,
    ));
    // `n` stays a number column (NA is a null, not text): two values, 1 + 3.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().nth(1),
        Some("2,4,3,4")
    );
    // Without the option, `NA` makes `n` a text column and `NULL` a string.
    ok(run(&["compress", "t.csv", "-o", "plain.zf"], d, None));
    let out = ok(run(
        &["sql", "SELECT count(s) FROM 'plain.zf'", "--format", "csv"],
        d,
        None,
    ));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().nth(1),
        Some("4")
    );
}
