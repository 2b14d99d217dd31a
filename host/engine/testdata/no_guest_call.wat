;; no_guest_call is a WASI command without the waPC __guest_call export.
(module
  (memory (export "memory") 1)
  (func (export "_start")))
