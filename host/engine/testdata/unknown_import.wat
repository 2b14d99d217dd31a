;; unknown_import imports a function no Kubewarden host provides.
(module
  (import "env" "abort" (func $abort))
  (memory (export "memory") 1)
  (func (export "__guest_call") (param i32 i32) (result i32)
    (call $abort)
    (i32.const 0)))
