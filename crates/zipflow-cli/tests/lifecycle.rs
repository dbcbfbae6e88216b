//! How a `zipflow` run ends: stopped by a signal, cut off by a closed pipe, or finished, and
//! what each way leaves on disk.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn zipflow() -> Command {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(env!("CARGO_BIN_EXE_zipflow"));
    // The tests send SIGINT and SIGTERM: the child handles them as a program started from a
    // terminal does, even where the tests run with them ignored (a shell's background job
    // ignores SIGINT, and zipflow keeps an ignored signal ignored).
    // SAFETY: between fork and exec the closure only calls signal(2), which is
    // async-signal-safe, and touches no memory of the parent.
    unsafe {
        c.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
    c
}

fn run(args: &[&str], dir: &Path) -> Output {
    zipflow()
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("running zipflow: {e}"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A CSV of `rows` rows with an integer, a float and a string column.
fn write_csv(path: &Path, rows: usize) {
    let f = std::fs::File::create(path).unwrap_or_else(|e| panic!("{e}"));
    let mut w = std::io::BufWriter::new(f);
    writeln!(w, "id,x,name").unwrap_or_else(|e| panic!("{e}"));
    for i in 0..rows {
        writeln!(w, "{},{}.{},name-{}", i * 7, i % 1000, i % 97, i % 5003)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    w.flush().unwrap_or_else(|e| panic!("{e}"));
}

/// Names in `dir` that start with a dot (zipflow's temporary files).
fn hidden_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

/// Waits until `dir` holds a temporary file of `child`, then sends it `signal`; returns the
/// exit code.
fn signal_while_writing(mut child: Child, dir: &Path, signal: &str) -> Option<i32> {
    let start = Instant::now();
    while hidden_files(dir).is_empty() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("zipflow ended ({status}) before writing a temporary file");
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no temporary file"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let killed = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap_or_else(|e| panic!("kill: {e}"));
    assert!(killed.success());
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    status.code()
}

/// Runs zipflow with `args` in `d`, sends it `signal` once its temporary file appears, and
/// checks that it exits with `code` and leaves neither a temporary file nor `output`.
fn interrupted(d: &Path, args: &[&str], signal: &str, code: i32, output: &str) {
    let child = zipflow()
        .args(args)
        .current_dir(d)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(signal_while_writing(child, d, signal), Some(code));
    assert_eq!(hidden_files(d), Vec::<String>::new());
    assert!(!d.join(output).exists());
}

#[test]
fn sigint_during_compress_removes_the_temporary_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path();
    write_csv(&d.join("big.csv"), 3_000_000);
    interrupted(
        d,
        &["compress", "big.csv", "-o", "big.zf"],
        "-INT",
        130,
        "big.zf",
    );
}

#[test]
fn sigterm_during_tpch_removes_the_temporary_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path();
    let args = ["tpch", "--sf", "0.3", "-o", "l.zf", "--no-parquet"];
    interrupted(d, &args, "-TERM", 143, "l.zf");
}

#[test]
fn sigint_during_decompress_removes_the_temporary_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path();
    write_csv(&d.join("big.csv"), 1_000_000);
    let o = run(&["compress", "big.csv", "-o", "big.zf", "-q"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::remove_file(d.join("big.csv")).unwrap_or_else(|e| panic!("{e}"));
    let args = ["decompress", "big.zf", "-o", "back.csv"];
    interrupted(d, &args, "-INT", 130, "back.csv");
}

#[test]
fn a_signal_ignored_at_start_stays_ignored() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path();
    write_csv(&d.join("big.csv"), 1_000_000);
    // `trap '' INT` ignores SIGINT, and exec keeps that for zipflow (as nohup does SIGHUP).
    let script = format!(
        "trap '' INT; exec '{}' compress big.csv -o big.zf -q",
        env!("CARGO_BIN_EXE_zipflow")
    );
    let child = Command::new("sh")
        .args(["-c", &script])
        .current_dir(d)
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let code = signal_while_writing(child, d, "-INT");
    assert_eq!(code, Some(0));
    assert!(d.join("big.zf").exists());
    assert_eq!(hidden_files(d), Vec::<String>::new());
}

/// Runs zipflow with its standard output closed before it prints anything.
fn with_stdout_closed(args: &[&str], dir: &Path) -> Output {
    let mut child = zipflow()
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    drop(child.stdout.take());
    child.wait_with_output().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_closed_stdout_ends_every_printing_command_quietly() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path();
    write_csv(&d.join("t.csv"), 200_000);
    let o = run(&["compress", "t.csv", "-o", "t.zf", "-q"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    let runs: [&[&str]; 5] = [
        &["inspect", "t.zf"],
        &["tpch", "--sf", "0.01", "--no-parquet", "-q"],
        &["sql", "SELECT id, name FROM 't.zf'", "--format", "csv"],
        &["compress", "t.csv", "-o", "u.zf", "-q"],
        &["gpu", "source", "t.zf", "--column", "id"],
    ];
    for args in runs {
        let o = with_stdout_closed(args, d);
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(o.status.code(), Some(141), "{args:?}: {err}");
        assert_eq!(err, "", "{args:?}");
    }
    assert_eq!(hidden_files(d), Vec::<String>::new());
}

/// The system calls of one run, from strace; `None` where strace cannot run here.
fn traced(args: &[&str], dir: &Path) -> Option<String> {
    let log = dir.join("trace.txt");
    let o = Command::new("strace")
        .args(["-f", "-qq", "-o"])
        .arg(&log)
        .args([
            "-e",
            "trace=openat,rename,renameat,renameat2,fsync,fdatasync",
        ])
        .arg(env!("CARGO_BIN_EXE_zipflow"))
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    if !o.status.success() {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(!text.contains("zipflow"), "zipflow failed: {}", stderr(&o));
        return None;
    }
    std::fs::read_to_string(&log).ok()
}

/// Whether, after the rename onto `name`, the trace opens `dir` and fsyncs that descriptor.
fn dir_synced_after_rename(trace: &str, dir: &Path, name: &str) -> bool {
    let lines: Vec<&str> = trace.lines().collect();
    let Some(renamed) = lines
        .iter()
        .position(|l| l.contains("rename") && l.contains(&format!("/{name}\"")))
    else {
        return false;
    };
    let quoted = format!("\"{}\"", dir.display());
    let fds: Vec<String> = lines[renamed..]
        .iter()
        .filter(|l| l.contains("openat(") && l.contains(&quoted))
        .filter_map(|l| l.rsplit("= ").next().map(|fd| fd.trim().to_string()))
        .collect();
    lines[renamed..].iter().any(|l| {
        fds.iter()
            .any(|fd| l.contains(&format!("fsync({fd})")) && l.trim_end().ends_with("= 0"))
    })
}

#[test]
fn every_output_syncs_its_directory_after_the_rename() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    write_csv(&d.join("t.csv"), 5_000);
    std::fs::write(d.join("notes.txt"), "some text\n".repeat(100))
        .unwrap_or_else(|e| panic!("{e}"));
    let p = |n: &str| d.join(n).to_string_lossy().into_owned();
    let runs: [(Vec<String>, &str); 4] = [
        (
            vec!["compress".into(), "t.csv".into(), "-o".into(), p("t.zf")],
            "t.zf",
        ),
        (
            vec![
                "decompress".into(),
                "t.zf".into(),
                "-o".into(),
                p("back.csv"),
            ],
            "back.csv",
        ),
        (
            vec![
                "compress".into(),
                "--text".into(),
                "notes.txt".into(),
                "-o".into(),
                p("notes.zf"),
            ],
            "notes.zf",
        ),
        (
            vec![
                "decompress".into(),
                "notes.zf".into(),
                "-o".into(),
                p("notes.back"),
            ],
            "notes.back",
        ),
    ];
    for (args, name) in runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let Some(trace) = traced(&args, &d) else {
            eprintln!("strace cannot run here; the directory sync is not checked");
            return;
        };
        assert!(
            dir_synced_after_rename(&trace, &d, name),
            "{args:?}: no fsync of {} after the rename:\n{trace}",
            d.display()
        );
    }
}
