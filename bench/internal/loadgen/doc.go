// Package loadgen drives an HTTPS admission webhook the way kube-apiserver
// does: AdmissionReview v1 bodies POSTed over a bounded set of HTTP/1.1
// keep-alive connections, every response checked (status, AdmissionReview,
// uid echo, verdict).
//
// Two modes: at a fixed rate (open loop: send times are scheduled in advance
// and latency is measured from the scheduled time, so a stalled server cannot
// hide its stall by slowing the generator down) and at saturation (closed
// loop: one worker per connection sends as soon as its previous answer
// arrives). The result carries exact latency percentiles, errors by class,
// the generator's own CPU time and, given a server pid, the server's CPU time
// and RSS read from /proc.
//
// cmd/loadgen is its command line.
package loadgen
