;; work exercises the instruction forms the budget instrumentation must walk
;; over: nested loops, br_table, call_indirect, blocks with results, memory
;; and bulk-memory instructions, constants of every width, and recursion.
;; sum(n) returns 0+1+...+(n-1) the long way; fib(n) is recursive.
(module
  (type $unary (func (param i32) (result i32)))
  (memory (export "memory") 1)
  (global $scratch (mut i32) (i32.const 0))
  (table 2 funcref)
  (elem (i32.const 0) $sum $fib)
  (data (i32.const 16) "abcdefgh")

  (func $sum (export "sum") (type $unary)
    (local $i i32) (local $acc i32) (local $j i32)
    (block $done
      (loop $outer
        (br_if $done (i32.ge_u (local.get $i) (local.get 0)))
        ;; an inner loop that runs once per outer iteration
        (local.set $j (i32.const 0))
        (loop $inner
          (local.set $j (i32.add (local.get $j) (i32.const 1)))
          (br_if $inner (i32.lt_u (local.get $j) (i32.const 1))))
        (local.set $acc (i32.add (local.get $acc) (local.get $i)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $outer)))
    (i64.store offset=8 (i32.const 0) (i64.const 0x7fffffffffffffff))
    (f64.store (i32.const 32) (f64.const 1.5))
    (f32.store (i32.const 40) (f32.const -2.5))
    (memory.copy (i32.const 48) (i32.const 16) (i32.const 8))
    (memory.fill (i32.const 56) (i32.const 0) (i32.const 4))
    (global.set $scratch (i32.load8_u (i32.const 48)))
    (drop (i32.trunc_sat_f64_s (f64.load (i32.const 32))))
    (block $b (result i32)
      (br_table $b $b (local.get $acc) (i32.and (local.get 0) (i32.const 1)))))

  (func $fib (export "fib") (type $unary)
    (if (result i32) (i32.lt_u (local.get 0) (i32.const 2))
      (then (local.get 0))
      (else
        (i32.add
          (call_indirect (type $unary) (i32.sub (local.get 0) (i32.const 1)) (i32.const 1))
          (call $fib (i32.sub (local.get 0) (i32.const 2)))))))

  ;; spin never returns.
  (func (export "spin") (loop $l (br $l)))
)
