;; simd uses a v128 instruction, which the instrumentation does not walk.
(module
  (memory (export "memory") 1)
  (func (export "lanes") (result i32)
    (i32x4.extract_lane 1 (v128.const i32x4 1 2 3 4))))
