//! TPC-H Q1 and Q6 as the specification writes them (DATE literals, INTERVAL arithmetic), for
//! a lineitem table at `path`.

/// TPC-H Q1 (pricing summary report), delta = 90 days.
pub fn q1(path: &str) -> String {
    format!(
        "SELECT l_returnflag, l_linestatus,
       sum(l_quantity) AS sum_qty,
       sum(l_extendedprice) AS sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
       avg(l_quantity) AS avg_qty,
       avg(l_extendedprice) AS avg_price,
       avg(l_discount) AS avg_disc,
       count(*) AS count_order
FROM '{path}'
WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY
GROUP BY l_returnflag, l_linestatus
ORDER BY l_returnflag, l_linestatus"
    )
}

/// TPC-H Q6 (forecasting revenue change), date 1994-01-01, discount 0.06, quantity 24.
pub fn q6(path: &str) -> String {
    format!(
        "SELECT sum(l_extendedprice * l_discount) AS revenue
FROM '{path}'
WHERE l_shipdate >= DATE '1994-01-01'
  AND l_shipdate < DATE '1994-01-01' + INTERVAL '1' YEAR
  AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01
  AND l_quantity < 24"
    )
}
