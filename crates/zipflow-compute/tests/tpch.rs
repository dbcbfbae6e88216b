//! TPC-H Q1 and Q6 on a generated lineitem table, checked against a plain evaluator over the
//! Arrow arrays, and the fast path checked against the reference path.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Date32Type, Decimal128Type};
use tpchgen::generators::LineItemGenerator;
use tpchgen_arrow::LineItemArrow;
use zipflow_compute::expr::parse_date;
use zipflow_compute::{ScanOptions, Table, Value, sql, tpch};
use zipflow_format::{TableWriter, WriteOptions};

fn lineitem(sf: f64) -> Vec<RecordBatch> {
    LineItemArrow::new(LineItemGenerator::new(sf, 1, 1))
        .with_batch_size(8192)
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn write(batches: &[RecordBatch], dir: &std::path::Path) -> String {
    write_with(batches, &dir.join("lineitem.zf"), 8192, &[])
}

/// Writes `batches` to `path` in chunks of `chunk_rows`, the columns named in `plans` with
/// those plans (the others chosen as usual); returns the path.
fn write_with(
    batches: &[RecordBatch],
    path: &std::path::Path,
    chunk_rows: usize,
    plans: &[(&str, &str)],
) -> String {
    let options = WriteOptions {
        chunk_rows,
        overwrite: true,
        plans: plans
            .iter()
            .map(|(c, p)| (c.to_string(), p.parse().unwrap_or_else(|e| panic!("{e}"))))
            .collect(),
        chooser: Some(zipflow_select::Chooser::shared(Default::default())),
        ..Default::default()
    };
    let mut w =
        TableWriter::create(path, batches[0].schema(), options).unwrap_or_else(|e| panic!("{e}"));
    for b in batches {
        w.write(b).unwrap_or_else(|e| panic!("{e}"));
    }
    w.finish().unwrap_or_else(|e| panic!("{e}"));
    path.to_string_lossy().into_owned()
}

/// Each query gives the same non-empty result on the fast path at 2 threads as on the
/// reference path at 1.
fn fast_equals_reference(path: &str, queries: &[String]) {
    for text in queries {
        let fast = run(path, text, 2, false);
        assert_eq!(fast, run(path, text, 1, true), "{text}");
        assert!(!fast.is_empty(), "{text}");
    }
}

fn col<'a>(b: &'a RecordBatch, name: &str) -> &'a Arc<dyn Array> {
    b.column_by_name(name)
        .unwrap_or_else(|| panic!("no {name}"))
}

fn dec(b: &RecordBatch, name: &str) -> Vec<i128> {
    col(b, name)
        .as_primitive::<Decimal128Type>()
        .values()
        .to_vec()
}

fn strs(b: &RecordBatch, name: &str) -> Vec<String> {
    let a = arrow::compute::cast(col(b, name), &DataType::Utf8).unwrap_or_else(|e| panic!("{e}"));
    a.as_string::<i32>()
        .iter()
        .map(|s| s.unwrap_or("").to_string())
        .collect()
}

fn run(path: &str, text: &str, threads: usize, reference: bool) -> Vec<Vec<Value>> {
    let table = Table::open(path).unwrap_or_else(|e| panic!("{e}"));
    let q = sql::plan(text, &table.schema().unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or_else(|e| panic!("{e}"));
    table
        .run(&q, &ScanOptions { threads, reference })
        .unwrap_or_else(|e| panic!("{e}"))
        .rows
}

#[test]
fn q1_and_q6_match_a_plain_arrow_evaluator() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let batches = lineitem(0.01);
    let path = write(&batches, dir.path());

    // Q1 by hand.
    let cutoff = parse_date("1998-09-02").unwrap_or_else(|e| panic!("{e}"));
    #[derive(Default)]
    struct G {
        qty: i128,
        base: i128,
        disc_price: i128,
        charge: i128,
        disc: i128,
        n: i64,
    }
    let mut groups: BTreeMap<(String, String), G> = BTreeMap::new();
    let mut revenue = 0i128;
    let (lo, hi) = (
        parse_date("1994-01-01").unwrap_or(0),
        parse_date("1995-01-01").unwrap_or(0),
    );
    for b in &batches {
        let (q, p, d, t) = (
            dec(b, "l_quantity"),
            dec(b, "l_extendedprice"),
            dec(b, "l_discount"),
            dec(b, "l_tax"),
        );
        let (rf, ls) = (strs(b, "l_returnflag"), strs(b, "l_linestatus"));
        let ship = col(b, "l_shipdate")
            .as_primitive::<Date32Type>()
            .values()
            .to_vec();
        for i in 0..b.num_rows() {
            if ship[i] <= cutoff {
                let g = groups.entry((rf[i].clone(), ls[i].clone())).or_default();
                g.qty += q[i];
                g.base += p[i];
                g.disc_price += p[i] * (100 - d[i]);
                g.charge += p[i] * (100 - d[i]) * (100 + t[i]);
                g.disc += d[i];
                g.n += 1;
            }
            if ship[i] >= lo && ship[i] < hi && (5..=7).contains(&d[i]) && q[i] < 2400 {
                revenue += p[i] * d[i];
            }
        }
    }
    let expected: Vec<Vec<Value>> = groups
        .iter()
        .map(|((rf, ls), g)| {
            let n = g.n as f64;
            vec![
                Value::Str(rf.clone()),
                Value::Str(ls.clone()),
                Value::Decimal(g.qty, 2),
                Value::Decimal(g.base, 2),
                Value::Decimal(g.disc_price, 4),
                Value::Decimal(g.charge, 6),
                Value::Float(g.qty as f64 / 100.0 / n),
                Value::Float(g.base as f64 / 100.0 / n),
                Value::Float(g.disc as f64 / 100.0 / n),
                Value::Int(g.n),
            ]
        })
        .collect();
    assert_eq!(expected.len(), 4);
    for (threads, reference) in [(1, false), (2, false), (2, true)] {
        assert_eq!(run(&path, &tpch::q1(&path), threads, reference), expected);
        assert_eq!(
            run(&path, &tpch::q6(&path), threads, reference),
            vec![vec![Value::Decimal(revenue, 4)]]
        );
    }
    // The constant-folded form of Q1's date gives the same answer.
    let folded = tpch::q1(&path).replace("DATE '1998-12-01' - INTERVAL '90' DAY", "'1998-09-02'");
    assert_eq!(run(&path, &folded, 2, false), expected);
}

#[test]
fn fast_path_equals_reference_path() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let batches = lineitem(0.002);
    let path = write(&batches, dir.path());
    let queries = [
        "SELECT count(*), sum(l_quantity), min(l_extendedprice), max(l_discount) FROM t",
        "SELECT l_linestatus, count(*), avg(l_tax) FROM t WHERE l_quantity >= 10.5 GROUP BY l_linestatus ORDER BY 1",
        "SELECT l_shipmode, sum(l_extendedprice * l_discount), min(l_shipdate), max(l_receiptdate) FROM t WHERE l_shipmode IN ('AIR', 'MAIL') AND l_discount <> 0.02 GROUP BY l_shipmode ORDER BY l_shipmode",
        "SELECT l_linenumber, count(l_comment) FROM t WHERE l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1995-06-30' OR l_tax = 0.08 GROUP BY l_linenumber ORDER BY l_linenumber",
        "SELECT sum(l_quantity * 2 - 1), sum(l_extendedprice / l_quantity) FROM t WHERE l_returnflag = 'R' AND NOT l_quantity < 20",
        "SELECT l_returnflag, max(l_partkey), min(l_orderkey) FROM t WHERE l_suppkey IN (1, 2, 3, 4, 5, 6, 7) OR l_partkey < 50 GROUP BY l_returnflag ORDER BY 1",
        "SELECT count(*) FROM t WHERE l_shipdate > DATE '2100-01-01'",
        "SELECT sum(l_quantity) FROM t WHERE l_quantity < 0.055 OR l_quantity > 49.999",
        "SELECT l_quantity, count(*) FROM t GROUP BY l_quantity HAVING count(*) > 200 ORDER BY count(*) DESC, l_quantity LIMIT 5",
        "SELECT l_shipmode, count(*) FROM t WHERE l_comment LIKE '%the%' AND l_shipmode NOT LIKE '%AIR' GROUP BY l_shipmode ORDER BY 1",
        "SELECT count(*), sum(l_quantity) FROM t WHERE l_comment ILIKE '%FOX%' OR l_shipinstruct LIKE 'TAKE%'",
        // No ORDER BY: groups in the order of their first rows that pass the WHERE.
        "SELECT l_shipmode, count(*) FROM t WHERE l_quantity > 45 GROUP BY l_shipmode",
        "SELECT l_partkey % 100, count(*), sum(l_quantity) FROM t WHERE l_quantity > 45 GROUP BY 1",
        "SELECT l_linenumber, count(*) FROM t WHERE l_quantity > 45 GROUP BY l_linenumber",
        "SELECT l_shipmode, l_linenumber, count(*) FROM t WHERE l_quantity > 45 GROUP BY 1, 2",
        // Dictionary codes and several keys as slots: still in first-seen order, also
        // among the ties ORDER BY leaves.
        "SELECT l_shipmode, count(*), sum(l_quantity) FROM t GROUP BY l_shipmode",
        "SELECT l_returnflag, l_linestatus, count(*) FROM t GROUP BY 1, 2",
        "SELECT l_partkey % 10, l_shipmode, count(*) FROM t GROUP BY 1, 2 ORDER BY 1 LIMIT 12",
        // More key combinations in a chunk than the fast path's slots: that chunk row by row.
        "SELECT l_partkey, l_orderkey, count(*), sum(l_quantity) FROM t GROUP BY 1, 2 ORDER BY 1, 2 LIMIT 30",
    ];
    let queries: Vec<String> = queries
        .iter()
        .map(|q| q.replace("FROM t", &format!("FROM '{path}'")))
        .collect();
    fast_equals_reference(&path, &queries);
}

#[test]
fn forced_encodings_agree_with_the_reference() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let batches = lineitem(0.002);
    let path = dir.path().join("forced.zf");
    let plans = [
        ("l_returnflag", "strdict(codes: bitpack)"),
        ("l_shipmode", "strdict(codes: bitpack)"),
        ("l_quantity", "for | bitpack"),
        ("l_discount", "dict(codes: bitpack, values: bitpack)"),
        ("l_tax", "rle"),
        ("l_extendedprice", "delta"),
        ("l_shipdate", "dict"),
    ];
    let path = write_with(&batches, &path, 5000, &plans);
    let queries = [
        tpch::q1(&path),
        tpch::q6(&path),
        format!(
            "SELECT l_shipmode, l_returnflag, count(*), sum(l_tax), max(l_extendedprice) FROM '{path}' WHERE l_shipmode <> 'RAIL' AND l_discount IN (0.01, 0.02, 0.03) GROUP BY l_shipmode, l_returnflag ORDER BY 1, 2"
        ),
        format!(
            "SELECT min(l_shipdate), max(l_shipdate), avg(l_discount) FROM '{path}' WHERE l_returnflag IN ('A', 'R') AND l_shipdate >= '1995-01-01'"
        ),
    ];
    fast_equals_reference(&path, &queries);
}

/// `LIKE` and `ILIKE` counts equal a filter over the Arrow strings written with `str`'s own
/// methods, on dictionary-coded, word-coded and plain string columns.
#[test]
fn like_matches_a_plain_string_filter() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let batches = lineitem(0.002);
    let strings = |name: &str| -> Vec<String> {
        batches
            .iter()
            .flat_map(|b| {
                let c = b.column_by_name(name).unwrap_or_else(|| panic!("{name}"));
                let c = arrow::compute::cast(c, &DataType::Utf8).unwrap_or_else(|e| panic!("{e}"));
                let a = c.as_string::<i32>();
                (0..a.len())
                    .map(|i| a.value(i).to_string())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let (comment, mode, instruct) = (
        strings("l_comment"),
        strings("l_shipmode"),
        strings("l_shipinstruct"),
    );
    let count = |f: &dyn Fn(usize) -> bool| (0..comment.len()).filter(|&i| f(i)).count() as i64;
    let cases: Vec<(&str, i64)> = vec![
        (
            "l_comment LIKE '%fox%'",
            count(&|i| comment[i].contains("fox")),
        ),
        (
            "l_comment NOT LIKE 'the%'",
            count(&|i| !comment[i].starts_with("the")),
        ),
        (
            "l_comment LIKE '%ly'",
            count(&|i| comment[i].ends_with("ly")),
        ),
        (
            "l_comment LIKE '_l%y_'",
            count(&|i| {
                let c: Vec<char> = comment[i].chars().collect();
                c.len() >= 4 && c[1] == 'l' && c[c.len() - 2] == 'y'
            }),
        ),
        (
            "l_comment ILIKE '%QUICK%'",
            count(&|i| comment[i].to_lowercase().contains("quick")),
        ),
        (
            "l_shipmode LIKE '%AIR'",
            count(&|i| mode[i].ends_with("AIR")),
        ),
        (
            "l_shipinstruct LIKE 'DELIVER_IN%' AND l_shipmode NOT LIKE 'R%'",
            count(&|i| instruct[i].starts_with("DELIVER IN") && !mode[i].starts_with('R')),
        ),
        ("l_shipmode LIKE '%'", comment.len() as i64),
    ];
    for (name, plans) in [
        ("default.zf", vec![]),
        (
            "plain.zf",
            vec![("l_comment", "plain"), ("l_shipmode", "plain")],
        ),
    ] {
        let path = write_with(&batches, &dir.path().join(name), 5000, &plans);
        for (pred, expected) in &cases {
            let q = format!("SELECT count(*) FROM '{path}' WHERE {pred}");
            for reference in [false, true] {
                assert_eq!(
                    run(&path, &q, 2, reference),
                    vec![vec![Value::Int(*expected)]],
                    "{name}: {pred} (reference path: {reference})"
                );
            }
        }
    }
}

/// CASE (searched and simple, with and without ELSE) against counts over the Arrow strings,
/// GROUP BY a position against GROUP BY the column's name, SELECT DISTINCT and DISTINCT
/// aggregates.
#[test]
fn case_and_group_positions() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let batches = lineitem(0.002);
    let path = write(&batches, dir.path());
    let mut modes: BTreeMap<String, i64> = BTreeMap::new();
    for b in &batches {
        let c = b
            .column_by_name("l_shipmode")
            .unwrap_or_else(|| panic!("l_shipmode"));
        let c = arrow::compute::cast(c, &DataType::Utf8).unwrap_or_else(|e| panic!("{e}"));
        let a = c.as_string::<i32>();
        for i in 0..a.len() {
            *modes.entry(a.value(i).to_string()).or_default() += 1;
        }
    }
    let air = modes.get("AIR").copied().unwrap_or(0);
    let rail_or_ship =
        modes.get("RAIL").copied().unwrap_or(0) + modes.get("SHIP").copied().unwrap_or(0);
    let total: i64 = modes.values().sum();
    let q = format!(
        "SELECT sum(CASE WHEN l_shipmode = 'AIR' THEN 1 ELSE 0 END), \
         sum(CASE l_shipmode WHEN 'RAIL' THEN 1 WHEN 'SHIP' THEN 1 END), \
         count(CASE WHEN l_shipmode = 'AIR' THEN NULL ELSE l_shipmode END) FROM '{path}'"
    );
    assert_eq!(
        run(&path, &q, 2, false),
        vec![vec![
            Value::Decimal(i128::from(air), 0),
            Value::Decimal(i128::from(rail_or_ship), 0),
            Value::Int(total - air)
        ]]
    );
    let by = |g: &str| {
        run(
            &path,
            &format!("SELECT l_shipmode, count(*) FROM '{path}' GROUP BY {g} ORDER BY 1"),
            2,
            false,
        )
    };
    let expected: Vec<Vec<Value>> = modes
        .iter()
        .map(|(m, n)| vec![Value::Str(m.as_str().into()), Value::Int(*n)])
        .collect();
    assert_eq!(by("1"), expected);
    assert_eq!(by("l_shipmode"), expected);
    let distinct = run(
        &path,
        &format!("SELECT DISTINCT l_shipmode FROM '{path}' ORDER BY 1"),
        2,
        false,
    );
    let names: Vec<Vec<Value>> = modes
        .keys()
        .map(|m| vec![Value::Str(m.as_str().into())])
        .collect();
    assert_eq!(distinct, names);
    // DISTINCT aggregates, across chunks and groups.
    let q = format!(
        "SELECT count(DISTINCT l_shipmode), min(DISTINCT l_shipmode), count(*) FROM '{path}'"
    );
    assert_eq!(
        run(&path, &q, 2, false),
        vec![vec![
            Value::Int(modes.len() as i64),
            Value::Str(modes.keys().next().map(String::as_str).unwrap_or("").into()),
            Value::Int(total)
        ]]
    );
    let per_mode = run(
        &path,
        &format!(
            "SELECT l_shipmode, count(DISTINCT l_shipmode), sum(DISTINCT 2) FROM '{path}' GROUP BY 1 ORDER BY 1"
        ),
        2,
        false,
    );
    let expected: Vec<Vec<Value>> = modes
        .keys()
        .map(|m| {
            vec![
                Value::Str(m.as_str().into()),
                Value::Int(1),
                Value::Decimal(2, 0),
            ]
        })
        .collect();
    assert_eq!(per_mode, expected);
}

#[test]
fn nulls_follow_sql_semantics() {
    use arrow::array::{Date32Array, Decimal128Array, Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let n = 3000i64;
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("d", DataType::Decimal128(10, 2), false),
        Field::new("t", DataType::Date32, false),
    ]));
    // Only the second chunk has nulls; the others take the block path.
    let a: Int64Array = (0..n)
        .map(|i| (!(1024..2048).contains(&i) || i % 3 != 0).then_some(i % 50 - 10))
        .collect();
    let s: StringArray = (0..n)
        .map(|i| {
            (!(1024..2048).contains(&i) || i % 5 != 0).then(|| ["x", "yy", "z"][(i % 3) as usize])
        })
        .collect();
    let d = Decimal128Array::from_iter_values((0..n).map(|i| i128::from(i * 7 % 1000 - 300)))
        .with_precision_and_scale(10, 2)
        .unwrap_or_else(|e| panic!("{e}"));
    let t = Date32Array::from_iter_values((0..n).map(|i| 9000 + (i % 400) as i32));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(a.clone()),
            Arc::new(s.clone()),
            Arc::new(d.clone()),
            Arc::new(t),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let path = write(&[batch], dir.path());
    let text = format!(
        "SELECT s, count(*), count(a), sum(a), min(a), sum(d * a), avg(d) FROM '{path}' WHERE a > -5 OR d < 0 GROUP BY s ORDER BY s"
    );
    let fast = run(&path, &text, 2, false);
    assert_eq!(fast, run(&path, &text, 1, true));
    // By hand, with SQL's rules: NULL > -5 is unknown, so `a > -5 OR d < 0` keeps a row with a
    // NULL `a` only when d < 0; sum and count skip NULLs; NULL strings form their own group.
    // rows, non-null a, sum(a), min(a), sum(d * a), sum(d)
    type Tally = (i64, i64, i128, Option<i64>, i128, i128);
    let mut groups: BTreeMap<Option<String>, Tally> = BTreeMap::new();
    for i in 0..n as usize {
        let av = a.is_valid(i).then(|| a.value(i));
        let dv = d.value(i);
        let keep = av.is_some_and(|x| x > -5) || dv < 0;
        if !keep {
            continue;
        }
        let key = s.is_valid(i).then(|| s.value(i).to_string());
        let g = groups.entry(key).or_insert((0, 0, 0, None, 0, 0));
        g.0 += 1;
        g.5 += dv;
        if let Some(x) = av {
            g.1 += 1;
            g.2 += i128::from(x);
            g.3 = Some(g.3.map_or(x, |m: i64| m.min(x)));
            g.4 += dv * i128::from(x);
        }
    }
    let mut expected: Vec<Vec<Value>> = groups
        .into_iter()
        .map(|(k, g)| {
            vec![
                k.map_or(Value::Null, Value::Str),
                Value::Int(g.0),
                Value::Int(g.1),
                if g.1 == 0 {
                    Value::Null
                } else {
                    Value::Decimal(g.2, 0)
                },
                g.3.map_or(Value::Null, Value::Int),
                if g.1 == 0 {
                    Value::Null
                } else {
                    Value::Decimal(g.4, 2)
                },
                Value::Float(g.5 as f64 / 100.0 / g.0 as f64),
            ]
        })
        .collect();
    // ORDER BY puts NULL last.
    expected.rotate_left(1);
    assert_eq!(fast, expected);
}

#[test]
fn scalar_functions_and_expression_keys() {
    use arrow::compute::kernels::temporal::{DatePart, date_part};
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let batches = lineitem(0.002);
    let path = write(&batches, dir.path());
    // The expected groups from Arrow's own date kernels and Rust's string functions.
    let (mut years, mut months) = (BTreeMap::<i64, i64>::new(), BTreeMap::<i64, i64>::new());
    let (mut prefixes, mut chars) = (BTreeMap::<String, i64>::new(), 0i64);
    for b in &batches {
        let col = |n: &str| b.column_by_name(n).unwrap_or_else(|| panic!("{n}")).clone();
        let part = |p: DatePart| {
            let a = date_part(col("l_shipdate").as_ref(), p).unwrap_or_else(|e| panic!("{e}"));
            a.as_primitive::<arrow::datatypes::Int32Type>().clone()
        };
        let (y, m) = (part(DatePart::Year), part(DatePart::Month));
        let utf8 = |n: &str| {
            arrow::compute::cast(&col(n), &DataType::Utf8).unwrap_or_else(|e| panic!("{e}"))
        };
        let (mode, comment) = (utf8("l_shipmode"), utf8("l_comment"));
        let (mode, comment) = (mode.as_string::<i32>(), comment.as_string::<i32>());
        for i in 0..b.num_rows() {
            *years.entry(i64::from(y.value(i))).or_default() += 1;
            if y.value(i) == 1995 {
                *months.entry(i64::from(m.value(i))).or_default() += 1;
            }
            let p: String = mode.value(i).chars().take(2).collect();
            *prefixes.entry(p.to_lowercase()).or_default() += 1;
            chars += comment.value(i).chars().count() as i64;
        }
    }
    let ints = |m: &BTreeMap<i64, i64>| -> Vec<Vec<Value>> {
        m.iter()
            .map(|(k, n)| vec![Value::Int(*k), Value::Int(*n)])
            .collect()
    };
    for reference in [false, true] {
        let q = |text: String| run(&path, &text, 2, reference);
        assert_eq!(
            q(format!(
                "SELECT extract(year FROM l_shipdate) AS y, count(*) FROM '{path}' GROUP BY y ORDER BY y"
            )),
            ints(&years)
        );
        assert_eq!(
            q(format!(
                "SELECT month(l_shipdate), count(*) FROM '{path}' \
                 WHERE year(l_shipdate) = 1995 GROUP BY 1 ORDER BY 1"
            )),
            ints(&months)
        );
        let expected: Vec<Vec<Value>> = prefixes
            .iter()
            .map(|(k, n)| vec![Value::Str(k.as_str().into()), Value::Int(*n)])
            .collect();
        assert_eq!(
            q(format!(
                "SELECT lower(substring(l_shipmode, 1, 2)) AS p, count(*) FROM '{path}' \
                 GROUP BY p HAVING count(*) > 0 ORDER BY p"
            )),
            expected
        );
        assert_eq!(
            q(format!("SELECT sum(length(l_comment)) FROM '{path}'")),
            vec![vec![Value::Decimal(i128::from(chars), 0)]]
        );
        let total: i64 = years.values().sum();
        assert_eq!(
            q(format!(
                "SELECT count(*), count(coalesce(NULL, l_shipmode)), min(abs(l_linenumber - 4)), \
                 max(abs(l_linenumber - 4)) FROM '{path}' \
                 WHERE trim(' ' || l_shipmode || '  ') = l_shipmode \
                 AND ltrim(' ' || l_shipmode) || rtrim('x ') = l_shipmode || 'x'"
            )),
            vec![vec![
                Value::Int(total),
                Value::Int(total),
                Value::Int(0),
                Value::Int(3)
            ]]
        );
    }
    let cols = vec![("d".to_string(), zipflow_compute::SqlType::Date)];
    let err = |q: &str| {
        sql::plan(q, &cols)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(err("SELECT extract(hour FROM d) FROM t").contains("EXTRACT(HOUR)"));
    assert!(err("SELECT upper(d) FROM t").contains("upper of a date"));
    assert!(err("SELECT length('a', 'b') FROM t").contains("takes 1 argument, not 2"));
    assert!(err("SELECT soundex(d) FROM t").contains("function `soundex`"));
    assert!(err("SELECT count(*) FROM t GROUP BY 1 + 1").contains("GROUP BY a constant"));
    assert!(err("SELECT abs('x') FROM t").contains("abs of a varchar"));
    assert!(err("SELECT concat('a', 'b') FROM t").contains("use ||"));
}

#[test]
fn unsupported_sql_names_the_construct() {
    let cols = vec![("a".to_string(), zipflow_compute::SqlType::Int)];
    let err = |q: &str| {
        sql::plan(q, &cols)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(err("SELECT a FROM t JOIN u ON t.a = u.a").contains("joins"));
    assert!(err("SELECT a FROM t WHERE a IN (SELECT a FROM u)").contains("subqueries"));
    assert!(err("SELECT sum(a) OVER () FROM t").contains("window functions"));
    assert!(err("SELECT a FROM t UNION SELECT a FROM u").contains("UNION"));
    assert!(err("SELECT b FROM t").contains("no column `b`"));
    assert!(err("SELECT a, count(*) FROM t").contains("GROUP BY"));
    assert!(err("SELECT a FROM t WHERE a LIKE '1%'").contains("LIKE on a"));
    assert!(err("SELECT a FROM t WHERE 'x' SIMILAR TO 'y'").contains("SIMILAR TO"));
    assert!(err("SELECT CASE WHEN a THEN 1 END FROM t").contains("needs a condition"));
    assert!(err("SELECT CASE WHEN a > 1 THEN 'x' ELSE 1 END FROM t").contains("do not combine"));
    assert!(err("SELECT a FROM t GROUP BY 2").contains("GROUP BY position 2"));
    assert!(err("SELECT DISTINCT a + 1 FROM t").contains("DISTINCT on an expression"));
    assert!(
        err("SELECT DISTINCT a, count(*) FROM t GROUP BY a").contains("DISTINCT with GROUP BY")
    );
}

#[test]
fn packed_bitmask_path_agrees_with_the_reference() {
    // Packed plans of every word type (u8 dictionary codes, u32 dates, u64 decimals and keys,
    // widths whose fields straddle words) and chunks that end inside a vector.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let batches = lineitem(0.003);
    let path = dir.path().join("packed.zf");
    let plans = [
        ("l_shipdate", "for | bitpack"),
        ("l_commitdate", "bitpack"),
        ("l_discount", "bitpack"),
        ("l_quantity", "dict(codes: bitpack, values: for | bitpack)"),
        ("l_tax", "dict(codes: bitpack, values: bitpack)"),
        ("l_extendedprice", "bitpack"),
        ("l_partkey", "for | bitpack"),
        ("l_linenumber", "bitpack"),
        ("l_returnflag", "strdict(codes: bitpack)"),
        ("l_linestatus", "strdict(codes: bitpack)"),
    ];
    let path = write_with(&batches, &path, 3000, &plans);
    let queries = [
        tpch::q1(&path),
        tpch::q6(&path),
        format!(
            "SELECT count(*), sum(l_extendedprice) FROM '{path}' WHERE l_partkey BETWEEN 1000 AND 1500 AND l_linenumber >= 3"
        ),
        format!(
            "SELECT count(*), sum(l_tax) FROM '{path}' WHERE l_tax BETWEEN 0.02 AND 0.05 AND l_quantity > 10 AND l_quantity <= 12"
        ),
        format!(
            "SELECT count(*), max(l_discount) FROM '{path}' WHERE l_commitdate < DATE '1993-03-01' AND l_discount >= 0.04"
        ),
        format!(
            "SELECT count(*), min(l_quantity) FROM '{path}' WHERE l_quantity > 49.5 AND l_shipdate > DATE '1992-01-01'"
        ),
        format!("SELECT count(*) FROM '{path}' WHERE l_quantity >= 20 AND l_quantity <= 19"),
        format!(
            "SELECT l_returnflag, count(*), sum(l_quantity) FROM '{path}' WHERE l_discount BETWEEN 0.02 AND 0.09 AND l_linenumber < 7 GROUP BY l_returnflag ORDER BY 1"
        ),
        format!(
            "SELECT count(*), sum(l_extendedprice * l_discount) FROM '{path}' WHERE l_shipdate >= DATE '1994-01-01' AND l_discount < 0.03 AND l_extendedprice * 2 > 50000"
        ),
    ];
    fast_equals_reference(&path, &queries);
}

#[test]
fn hipatch_columns_agree_with_the_reference() {
    // `hipatch` over packed low bits, under `for` and not, with exceptions both rare
    // (l_extendedprice) and common (l_tax, l_discount); filters over them, whole blocks and
    // the few rows a selective filter gathers.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let batches = lineitem(0.003);
    let path = dir.path().join("hipatch.zf");
    let plans = [
        ("l_extendedprice", "for | hipatch | bitpack"),
        ("l_tax", "hipatch(2) | bitpack"),
        (
            "l_discount",
            "for | hipatch(2, counts: bitpack, high: plain) | bitpack",
        ),
        ("l_shipdate", "for | hipatch(10) | bitpack"),
        ("l_quantity", "hipatch(3) | for | bitpack"),
    ];
    let path = write_with(&batches, &path, 3000, &plans);
    let queries = [
        tpch::q1(&path),
        tpch::q6(&path),
        format!(
            "SELECT count(*), sum(l_extendedprice), max(l_tax), min(l_discount) FROM '{path}' WHERE l_partkey BETWEEN 1000 AND 1300"
        ),
        format!(
            "SELECT count(*), sum(l_extendedprice) FROM '{path}' WHERE l_tax >= 0.05 AND l_discount < 0.03 AND l_shipdate < DATE '1995-06-01'"
        ),
    ];
    fast_equals_reference(&path, &queries);
}

/// Variances and standard deviations against a two-pass computation over the Arrow arrays
/// (and the fast path bit for bit against the reference path), `%` and `date_trunc` against
/// the Arrow data and other functions, and GROUP BY ALL against GROUP BY positions.
#[test]
fn moments_remainders_date_trunc_and_group_by_all() {
    use arrow::datatypes::Int32Type;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let batches = lineitem(0.005);
    let path = write(&batches, dir.path());
    let float = |v: &Value| match v {
        Value::Float(x) => *x,
        other => panic!("not a float: {other:?}"),
    };
    // (n, mean, sum of squared deviations) of each value list, two passes.
    let moments = |xs: &[f64]| {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        (n, xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>())
    };
    let close = |got: f64, want: f64, what: &str| {
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1e-12),
            "{what}: {got} against {want}"
        );
    };
    // Per return flag: quantities and prices as numbers, line numbers.
    let mut qty: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut price: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut line: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut mod3: BTreeMap<i32, i64> = BTreeMap::new();
    let mut price_mod7 = 0i128;
    for b in &batches {
        let flags = strs(b, "l_returnflag");
        let (q, p) = (dec(b, "l_quantity"), dec(b, "l_extendedprice"));
        let ln = col(b, "l_linenumber").as_primitive::<Int32Type>().values();
        for i in 0..b.num_rows() {
            let f = flags[i].clone();
            qty.entry(f.clone()).or_default().push(q[i] as f64 / 100.0);
            price
                .entry(f.clone())
                .or_default()
                .push(p[i] as f64 / 100.0);
            line.entry(f).or_default().push(f64::from(ln[i]));
            *mod3.entry(ln[i] % 3).or_default() += 1;
            price_mod7 += p[i] % 700;
        }
    }
    let q = format!(
        "SELECT l_returnflag, var_samp(l_quantity), var_pop(l_quantity), \
         stddev(l_extendedprice), stddev_pop(l_linenumber), variance(l_linenumber) \
         FROM '{path}' GROUP BY 1 ORDER BY 1"
    );
    let rows = run(&path, &q, 2, false);
    assert_eq!(rows.len(), qty.len());
    for (r, (flag, qs)) in rows.iter().zip(&qty) {
        assert_eq!(r[0], Value::Str(flag.as_str().into()));
        let (n, m2) = moments(qs);
        close(float(&r[1]), m2 / (n - 1.0), "var_samp");
        close(float(&r[2]), m2 / n, "var_pop");
        let (n, m2) = moments(&price[flag]);
        close(float(&r[3]), (m2 / (n - 1.0)).sqrt(), "stddev");
        let (n, m2) = moments(&line[flag]);
        close(float(&r[4]), (m2 / n).sqrt(), "stddev_pop");
        close(float(&r[5]), m2 / (n - 1.0), "variance");
    }
    // The fast path (one slot, kept and discarded rows, few rows gathered, groups, a float
    // argument) equals the reference path bit for bit.
    let queries = [
        q,
        format!("SELECT stddev(l_extendedprice), var_pop(l_tax), count(*) FROM '{path}'"),
        format!("SELECT var_samp(l_extendedprice) FROM '{path}' WHERE l_quantity < 10"),
        format!("SELECT stddev_pop(l_discount) FROM '{path}' WHERE l_quantity < 2"),
        format!(
            "SELECT l_linestatus, stddev(l_extendedprice / 3) FROM '{path}' GROUP BY 1 ORDER BY 1"
        ),
        // `%` by a literal and date functions, as keys, in filters and in aggregates.
        format!(
            "SELECT l_linenumber % 3, count(*), sum(l_quantity) FROM '{path}' GROUP BY 1 ORDER BY 1"
        ),
        format!(
            "SELECT date_trunc('month', l_shipdate) m, sum(l_extendedprice % 7), \
             sum(-l_quantity % 4), sum(l_extendedprice / 3 % 2) FROM '{path}' \
             WHERE l_shipdate >= DATE '1995-01-01' GROUP BY m ORDER BY m"
        ),
        format!(
            "SELECT year(l_shipdate), quarter(l_shipdate), l_returnflag, count(*) FROM '{path}' \
             GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
        ),
        format!(
            "SELECT dayofweek(l_commitdate), max(dayofyear(l_receiptdate)), \
             min(date_trunc('week', l_shipdate)) FROM '{path}' \
             WHERE l_orderkey % 7 = 3 GROUP BY 1 ORDER BY 1"
        ),
        // A date plus or minus days, a literal's or a column's.
        format!("SELECT l_shipdate + l_linenumber, count(*) FROM '{path}' GROUP BY 1 ORDER BY 1"),
        format!("SELECT min(l_shipdate + 1), max(l_shipdate - 1), min(l_shipdate) FROM '{path}'"),
    ];
    fast_equals_reference(&path, &queries);
    let shifted = run(
        &path,
        &format!("SELECT min(l_shipdate + 1), min(l_shipdate) FROM '{path}'"),
        1,
        false,
    );
    match shifted.as_slice() {
        [r] => match r.as_slice() {
            [Value::Date(a), Value::Date(b)] => assert_eq!(*a, b + 1),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    // A single value: no sample variance, a population variance of 0.
    let one = run(
        &path,
        &format!(
            "SELECT var_samp(l_quantity), var_pop(l_quantity) FROM '{path}' WHERE l_orderkey = 1 AND l_linenumber = 1"
        ),
        1,
        false,
    );
    assert_eq!(one, vec![vec![Value::Null, Value::Float(0.0)]]);

    // `%`: remainders of the dividend's sign, decimals at a common scale, NULL by 0.
    let by_mod = run(
        &path,
        &format!("SELECT l_linenumber % 3, count(*) FROM '{path}' GROUP BY 1 ORDER BY 1"),
        2,
        false,
    );
    let expected: Vec<Vec<Value>> = mod3
        .iter()
        .map(|(m, n)| vec![Value::Int(i64::from(*m)), Value::Int(*n)])
        .collect();
    assert_eq!(by_mod, expected);
    let sums = run(
        &path,
        &format!(
            "SELECT sum(l_extendedprice % 7), count(l_quantity % 0), sum(l_quantity % 0) FROM '{path}'"
        ),
        2,
        false,
    );
    assert_eq!(
        sums,
        vec![vec![
            Value::Decimal(price_mod7, 2),
            Value::Int(0),
            Value::Null
        ]]
    );

    // date_trunc: months against year and month, weeks start on Monday.
    let months = run(
        &path,
        &format!(
            "SELECT date_trunc('month', l_shipdate) AS m, count(*) FROM '{path}' GROUP BY m ORDER BY m"
        ),
        2,
        false,
    );
    let ym = run(
        &path,
        &format!(
            "SELECT year(l_shipdate), month(l_shipdate), count(*) FROM '{path}' GROUP BY 1, 2 ORDER BY 1, 2"
        ),
        2,
        false,
    );
    let expected: Vec<Vec<Value>> = ym
        .iter()
        .map(|r| match r.as_slice() {
            [Value::Int(y), Value::Int(m), n] => vec![
                Value::Date(
                    parse_date(&format!("{y:04}-{m:02}-01")).unwrap_or_else(|e| panic!("{e}")),
                ),
                n.clone(),
            ],
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(months, expected);
    let total: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let weeks = run(
        &path,
        &format!(
            "SELECT count(*) FROM '{path}' WHERE dayofweek(date_trunc('week', l_shipdate)) = 1 \
             AND l_shipdate - date_trunc('week', l_shipdate) BETWEEN 0 AND 6"
        ),
        2,
        false,
    );
    assert_eq!(weeks, vec![vec![Value::Int(total as i64)]]);

    // GROUP BY ALL groups by the select items without aggregates.
    let all = |g: &str| {
        run(
            &path,
            &format!(
                "SELECT l_returnflag, l_linestatus, sum(l_quantity), count(*) FROM '{path}' \
                 GROUP BY {g} ORDER BY 1, 2"
            ),
            2,
            false,
        )
    };
    assert_eq!(all("ALL"), all("1, 2"));
    assert_eq!(all("ALL").len(), 4);
}

#[test]
fn many_groups_merge_in_first_seen_order_across_batches_and_threads() {
    use arrow::array::{Decimal128Array, Float64Array, Int64Array};
    use arrow::datatypes::{Field, Schema};
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // 40 chunks of 1024 rows (several merge batches at two threads), 3,001 scattered keys,
    // nulls in one chunk's `a` only.
    let n = 40_960i64;
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("a", DataType::Int64, true),
        Field::new("d", DataType::Decimal128(12, 2), false),
        Field::new("f", DataType::Float64, false),
    ]));
    let k = Int64Array::from_iter_values((0..n).map(|i| i * 7919 % 3001));
    let a: Int64Array = (0..n)
        .map(|i| (!(5 * 1024..6 * 1024).contains(&i) || i % 4 != 0).then_some(i % 977 - 300))
        .collect();
    let d =
        Decimal128Array::from_iter_values((0..n).map(|i| i128::from(i * 37 % 100_000 - 20_000)))
            .with_precision_and_scale(12, 2)
            .unwrap_or_else(|e| panic!("{e}"));
    let f = Float64Array::from_iter_values((0..n).map(|i| (i % 1013) as f64 / 7.0 - 40.0));
    let batch = RecordBatch::try_new(
        schema,
        vec![Arc::new(k), Arc::new(a), Arc::new(d), Arc::new(f)],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let path = write_with(&[batch], &dir.path().join("g.zf"), 1024, &[]);
    let queries: Vec<String> = [
        // Every chunk on the fast path; no ORDER BY, so the groups' order is compared too.
        "SELECT k, count(*), sum(d), min(d), max(d), sum(f), avg(f), min(f), max(f), stddev(f), var_pop(d) FROM t GROUP BY k",
        "SELECT k % 7, k, sum(f) FROM t WHERE d > 0 GROUP BY k % 7, k",
        // One chunk (nulls in `a`) on the reference path, merged with the others.
        "SELECT k, count(a), sum(a), min(a), max(a), sum(f), stddev(a), count(*) FROM t GROUP BY k",
        "SELECT count(*), sum(f), min(a) FROM t",
    ]
    .iter()
    .map(|q| q.replace("FROM t", &format!("FROM '{path}'")))
    .collect();
    fast_equals_reference(&path, &queries);
    for q in &queries[..3] {
        assert_eq!(run(&path, q, 1, false), run(&path, q, 1, true), "{q}");
        assert!(run(&path, q, 2, false).len() > 3000 / 7, "{q}");
    }
}

#[test]
fn groups_merged_by_key_value_match_the_reference_for_every_key_kind() {
    use arrow::array::{Date32Array, Decimal128Array, Int32Array, Int64Array};
    use arrow::datatypes::{Field, Schema};
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // 40 chunks of 1024 rows. `k`: 70,000 values over the file (within twice its rows, so
    // merged by value), each chunk's spread too wide for a table (ids from a map, slots not
    // in key order); `s`: a few hundred negative and positive values (a table, slots in key
    // order); `p` a decimal and `day` a date key; `z` a key with nulls in one chunk (merged
    // by hash); `a` with nulls in another chunk (that chunk on the reference path); `t` 200
    // values each chunk holds all of and `u` 64 values spread over 190 (at least four rows a
    // value in a chunk's range: ordered by the key, slots numbered by value, some empty).
    let n = 40_960i64;
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("s", DataType::Int32, false),
        Field::new("p", DataType::Decimal128(9, 2), false),
        Field::new("day", DataType::Date32, false),
        Field::new("z", DataType::Int64, true),
        Field::new("a", DataType::Int64, true),
        Field::new("t", DataType::Int32, false),
        Field::new("u", DataType::Int64, false),
    ]));
    let k = Int64Array::from_iter_values((0..n).map(|i| i * 7919 % 70_000));
    let s = Int32Array::from_iter_values((0..n).map(|i| (i * 31 % 601 - 300) as i32));
    let p = Decimal128Array::from_iter_values((0..n).map(|i| i128::from(i * 13 % 5000 - 2500)))
        .with_precision_and_scale(9, 2)
        .unwrap_or_else(|e| panic!("{e}"));
    let day = Date32Array::from_iter_values((0..n).map(|i| 9000 + (i * 17 % 2500) as i32));
    let z: Int64Array = (0..n)
        .map(|i| (!(3 * 1024..4 * 1024).contains(&i) || i % 3 != 0).then_some(i % 1999))
        .collect();
    let a: Int64Array = (0..n)
        .map(|i| (!(7 * 1024..8 * 1024).contains(&i) || i % 5 != 0).then_some(i % 977 - 300))
        .collect();
    let t = Int32Array::from_iter_values((0..n).map(|i| (i % 200 - 100) as i32));
    let u = Int64Array::from_iter_values((0..n).map(|i| (i * 37 % 64) * 3));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(k),
            Arc::new(s),
            Arc::new(p),
            Arc::new(day),
            Arc::new(z),
            Arc::new(a),
            Arc::new(t),
            Arc::new(u),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let path = write_with(&[batch], &dir.path().join("v.zf"), 1024, &[]);
    let mut queries = Vec::new();
    for key in ["k", "s", "p", "day", "z", "t", "u"] {
        // No ORDER BY: the groups' first-seen order is compared too.
        queries.push(format!(
            "SELECT {key}, count(*), sum(a), min(a), max(s), avg(p) FROM t GROUP BY {key}"
        ));
        queries.push(format!(
            "SELECT {key}, count(*), sum(p) FROM t WHERE s > 100 GROUP BY {key}"
        ));
        // Ordered by the key (groups merged by value then skip the first-seen order), in
        // both directions, behind a LIMIT and OFFSET, and by the key as a second item.
        queries.push(format!(
            "SELECT count(*), {key}, max(a) FROM t GROUP BY {key} ORDER BY {key}"
        ));
        queries.push(format!(
            "SELECT {key} AS x, sum(s) FROM t GROUP BY {key} ORDER BY x DESC LIMIT 50 OFFSET 7"
        ));
        queries.push(format!(
            "SELECT {key}, count(*) AS c FROM t GROUP BY {key} ORDER BY c, {key}"
        ));
        // Float sums, extremes and moments (merged slot by slot), some groups filtered out.
        queries.push(format!(
            "SELECT {key}, sum(s * 0.5e0), min(p * 1.5e0), max(s * -1e0), stddev(p), avg(a) \
             FROM t WHERE day < DATE '1997-01-01' GROUP BY {key} ORDER BY {key}"
        ));
    }
    let queries: Vec<String> = queries
        .iter()
        .map(|q| q.replace("FROM t", &format!("FROM '{path}'")))
        .collect();
    fast_equals_reference(&path, &queries);
    for q in &queries {
        assert_eq!(run(&path, q, 1, false), run(&path, q, 1, true), "{q}");
    }
    // Every value of `k` is a group; `z`'s nulls are one.
    assert_eq!(run(&path, &queries[0], 2, false).len(), 40_960);
    assert_eq!(run(&path, &queries[24], 1, false).len(), 2000);
    assert_eq!(run(&path, &queries[3], 2, false).len(), 50);
}

/// Random GROUP BY queries (one or two keys, one to four aggregates, an optional WHERE, ORDER
/// BY and LIMIT) give the same rows, in the same order, on the fast path at two threads and
/// one and on the reference path.
#[test]
fn random_group_by_queries_match_the_reference() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let batches = lineitem(0.004);
    let path = write_with(&batches, &dir.path().join("r.zf"), 4096, &[]);
    let keys = [
        "l_suppkey",
        "l_partkey",
        "l_orderkey",
        "l_linenumber",
        "l_shipmode",
        "l_returnflag",
        "l_linestatus",
        "l_quantity",
        "l_shipdate",
        "l_discount",
        "l_suppkey % 10",
        "l_partkey % 97",
        "year(l_shipdate)",
        "l_tax",
    ];
    let aggs = [
        "count(*)",
        "sum(l_quantity)",
        "min(l_shipdate)",
        "max(l_extendedprice)",
        "avg(l_discount)",
        "sum(l_extendedprice * (1 - l_discount))",
        "count(l_comment)",
        "min(l_partkey)",
        "max(l_suppkey)",
        "stddev(l_quantity)",
        "sum(l_tax * 1.5e0)",
        "min(l_extendedprice * 0.5e0)",
        "avg(l_quantity * 2e0)",
        "var_pop(l_discount)",
    ];
    let preds = [
        "l_quantity > 45",
        "l_discount BETWEEN 0.02 AND 0.05",
        "l_shipdate < DATE '1995-01-01'",
        "l_shipmode IN ('AIR', 'MAIL')",
        "l_suppkey < 10",
        "l_orderkey % 3 = 1",
        "l_returnflag = 'R'",
        "l_partkey > 100 AND l_partkey < 400",
        "l_comment LIKE '%fox%'",
        "NOT l_linenumber = 1",
        "l_tax = 0.08 OR l_quantity < 3",
    ];
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    for _ in 0..120 {
        let mut items: Vec<&str> = Vec::new();
        let nkeys = if next(4) == 0 { 2 } else { 1 };
        while items.len() < nkeys {
            let k = keys[next(keys.len())];
            if !items.contains(&k) {
                items.push(k);
            }
        }
        for _ in 0..1 + next(4) {
            items.push(aggs[next(aggs.len())]);
        }
        let mut q = format!("SELECT {} FROM '{path}'", items.join(", "));
        if next(10) < 7 {
            let a = preds[next(preds.len())];
            q += &format!(" WHERE {a}");
            if next(2) == 0 {
                q += &format!(" AND {}", preds[next(preds.len())]);
            }
        }
        let positions: Vec<String> = (1..=nkeys).map(|i| i.to_string()).collect();
        q += &format!(" GROUP BY {}", positions.join(", "));
        match next(10) {
            0..=2 => q += " ORDER BY 1",
            3 => q += " ORDER BY 1 DESC LIMIT 20",
            _ => {}
        }
        let fast = run(&path, &q, 2, false);
        assert_eq!(fast, run(&path, &q, 1, false), "{q}");
        assert_eq!(fast, run(&path, &q, 1, true), "{q}");
    }
}
