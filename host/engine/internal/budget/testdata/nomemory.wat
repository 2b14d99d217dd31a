;; nomemory has no memory, so the instrumentation cannot yield through
;; memory.grow.
(module
  (func (export "one") (result i32) (i32.const 1)))
