;; reactor has the shape of a reactor build (-buildmode=c-shared plus
;; wapc_init): no _start, and wapc_init traps unless _initialize ran first.
;; Kubewarden's policy-server never calls _initialize, so this module cannot
;; start there, and the engine, which starts modules the same way, must
;; refuse it too. Guest calls fail unless both initializers ran;
;; protocol_version answers "v1".
(module
  (import "wapc" "__guest_request" (func $guest_request (param i32 i32)))
  (import "wapc" "__guest_response" (func $guest_response (param i32 i32)))

  ;; Memory layout: constants below 256, the operation at 256 (at most 256
  ;; bytes), scratch from 1024, the payload at 65536 (memory grows to fit).
  (memory (export "memory") 2)
  (data (i32.const 0) "protocol_version")
  (data (i32.const 16) "\"v1\"")

  ;; $request fetches the operation and payload of the current call.
  (func $request (param $op_len i32) (param $payload_len i32)
    (local $pages i32)
    (if (i32.gt_u (local.get $op_len) (i32.const 256)) (then (unreachable)))
    ;; pages needed for 65536 + payload_len bytes
    (local.set $pages
      (i32.shr_u (i32.add (local.get $payload_len) (i32.const 0x1ffff)) (i32.const 16)))
    (if (i32.gt_u (local.get $pages) (memory.size))
      (then
        (if (i32.eq (memory.grow (i32.sub (local.get $pages) (memory.size))) (i32.const -1))
          (then (unreachable)))))
    (call $guest_request (i32.const 256) (i32.const 65536)))

  ;; $op_is reports whether the operation equals the len bytes at ptr.
  (func $op_is (param $op_len i32) (param $ptr i32) (param $len i32) (result i32)
    (local $i i32)
    (if (i32.ne (local.get $op_len) (local.get $len)) (then (return (i32.const 0))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (if (i32.ne (i32.load8_u offset=256 (local.get $i))
                    (i32.load8_u (i32.add (local.get $ptr) (local.get $i))))
          (then (return (i32.const 0))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const 1))

  ;; 0: nothing ran, 1: _initialize ran, 2: then wapc_init ran.
  (global $state (mut i32) (i32.const 0))

  (func (export "_initialize")
    (global.set $state (i32.const 1)))

  (func (export "wapc_init")
    (if (i32.ne (global.get $state) (i32.const 1)) (then (unreachable)))
    (global.set $state (i32.const 2)))

  (func (export "__guest_call") (param $op_len i32) (param $payload_len i32) (result i32)
    (call $request (local.get $op_len) (local.get $payload_len))
    (if (i32.ne (global.get $state) (i32.const 2)) (then (return (i32.const 0))))
    (if (call $op_is (local.get $op_len) (i32.const 0) (i32.const 16))
      (then
        (call $guest_response (i32.const 16) (i32.const 4))
        (return (i32.const 1))))
    (i32.const 0))
)
