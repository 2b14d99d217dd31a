;; start loops 200,000 times in its start function, which runs while the
;; module is instantiated, before any host could set a budget.
(module
  (memory (export "memory") 1)
  (global $n (export "n") (mut i32) (i32.const 0))
  (func $count
    (loop $l
      (global.set $n (i32.add (global.get $n) (i32.const 1)))
      (br_if $l (i32.lt_u (global.get $n) (i32.const 200000)))))
  (start $count))
