;; hostile is a waPC guest for the webhook's failure tests. protocol_version
;; answers "v1" and validate_settings {"valid":true}, so a server starts with
;; it; validate then does what the first character of request.uid says, for
;; a request whose JSON starts with {"uid":" (the character is at payload
;; offset 19, after {"request":{"uid":"):
;;   a  accept                     {"accepted":true}
;;   d  deny                       {"accepted":false,"message":"hostile says no","code":403}
;;   t  trap (unreachable)
;;   l  loop forever
;;   g  grow memory until memory.grow fails, then trap
;;   e  proc_exit(1)
;;   j  answer invalid JSON        {"accepted": tru
;; Any other character accepts.
(module
  (import "wapc" "__guest_request" (func $guest_request (param i32 i32)))
  (import "wapc" "__guest_response" (func $guest_response (param i32 i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))

  ;; Memory layout: constants below 256, the operation at 256 (at most 256
  ;; bytes), the payload at 65536 (memory grows to fit).
  (memory (export "memory") 2)
  (data (i32.const 0) "protocol_version")
  (data (i32.const 16) "\"v1\"")
  (data (i32.const 20) "validate_settings")
  (data (i32.const 40) "{\"valid\":true}")
  (data (i32.const 60) "validate")
  (data (i32.const 70) "{\"accepted\":true}")
  (data (i32.const 90) "{\"accepted\":false,\"message\":\"hostile says no\",\"code\":403}")
  (data (i32.const 150) "{\"accepted\": tru")

  (func $request (param $op_len i32) (param $payload_len i32)
    (local $pages i32)
    (if (i32.gt_u (local.get $op_len) (i32.const 256)) (then (unreachable)))
    (local.set $pages
      (i32.shr_u (i32.add (local.get $payload_len) (i32.const 0x1ffff)) (i32.const 16)))
    (if (i32.gt_u (local.get $pages) (memory.size))
      (then
        (if (i32.eq (memory.grow (i32.sub (local.get $pages) (memory.size))) (i32.const -1))
          (then (unreachable)))))
    (call $guest_request (i32.const 256) (i32.const 65536)))

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

  (func $respond (param $ptr i32) (param $len i32) (result i32)
    (call $guest_response (local.get $ptr) (local.get $len))
    (i32.const 1))

  (func (export "__guest_call") (param $op_len i32) (param $payload_len i32) (result i32)
    (local $c i32)
    (call $request (local.get $op_len) (local.get $payload_len))
    (if (call $op_is (local.get $op_len) (i32.const 0) (i32.const 16))
      (then (return (call $respond (i32.const 16) (i32.const 4)))))
    (if (call $op_is (local.get $op_len) (i32.const 20) (i32.const 17))
      (then (return (call $respond (i32.const 40) (i32.const 14)))))
    (if (i32.eqz (call $op_is (local.get $op_len) (i32.const 60) (i32.const 8)))
      (then (unreachable)))
    (if (i32.gt_u (local.get $payload_len) (i32.const 19))
      (then (local.set $c (i32.load8_u (i32.const 65555)))))
    (if (i32.eq (local.get $c) (i32.const 100)) ;; d
      (then (return (call $respond (i32.const 90) (i32.const 57)))))
    (if (i32.eq (local.get $c) (i32.const 116)) ;; t
      (then (unreachable)))
    (if (i32.eq (local.get $c) (i32.const 108)) ;; l
      (then (loop $forever (br $forever))))
    (if (i32.eq (local.get $c) (i32.const 103)) ;; g
      (then
        (loop $more
          (br_if $more (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
        (unreachable)))
    (if (i32.eq (local.get $c) (i32.const 101)) ;; e
      (then (call $proc_exit (i32.const 1))))
    (if (i32.eq (local.get $c) (i32.const 106)) ;; j
      (then (return (call $respond (i32.const 150) (i32.const 16)))))
    (call $respond (i32.const 70) (i32.const 17)))
)
