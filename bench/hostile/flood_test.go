package hostile

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The fat dry-run flood: fatWorkers reviews of 1.2-3 MiB at once, one
// after another, from one user (server-side dry runs cost that user
// nothing: nothing is stored, no quota is charged), while another user's
// ordinary reviews arrive at fatOrdinaryRate a second, all through one
// API server's HTTP/2 client.
const (
	fatWorkers      = 24
	fatOrdinary     = 60
	fatOrdinaryRate = 20
)

// Class 8: one user's fat reviews cannot take what everyone shares. Large
// bodies are charged to a reserve of their own (half the body budget) and
// wait for their slot there, so every ordinary review keeps its budget and
// its slot: all are evaluated. And every answer, the flood's refusals
// included, is a review inside an HTTP 200 (a busy webhook refuses, code
// 429), so failurePolicy Ignore cannot skip a check for a busy webhook.
func fatFlood(t *testing.T) {
	const class = "fat-flood"
	s := startServe(t, "--instances", "2")
	var fat [][]byte
	for _, n := range []int{95_000, 150_000, 230_000} { // 1.2, 1.9 and 3.0 MiB
		fat = append(fat, podReview("fat", "mallory", "", annotations(n), "CREATE"))
	}
	fmt.Printf("hostile: %-28s %d at once of %.1f-%.1f MiB from one user; %d ordinary reviews at %d/s from another, one HTTP/2 client\n",
		class, fatWorkers, float64(len(fat[0]))/(1<<20), float64(len(fat[2]))/(1<<20), fatOrdinary, fatOrdinaryRate)

	ctx, stop := context.WithCancel(t.Context())
	var (
		mu                           sync.Mutex
		fatSent, fatMutated, fatBusy int
		fatOther, fatNot200, fatErrs int
		fatWG                        sync.WaitGroup
		ordinaryMs                   []float64
		ordinaryBad                  atomic.Int64
		ordinaryWG                   sync.WaitGroup
		firstBad                     []string
	)
	for w := range fatWorkers {
		fatWG.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				a, err := s.review(ctx, fat[(w+i)%len(fat)])
				if ctx.Err() != nil {
					return
				}
				mu.Lock()
				fatSent++
				switch {
				case err != nil:
					fatErrs++
				case a.HTTP != 200:
					fatNot200++
				case a.Allowed && a.Patched:
					fatMutated++
				case !a.Allowed && a.Code == 429:
					fatBusy++
				default:
					fatOther++
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(time.Second) // the flood is under way
	tick := time.NewTicker(time.Second / fatOrdinaryRate)
	for i := range fatOrdinary {
		<-tick.C
		ordinaryWG.Go(func() {
			rctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			a, err := s.review(rctx, podReview("ordinary-"+strconv.Itoa(i), "bob", "", "", ""))
			mu.Lock()
			defer mu.Unlock()
			if err == nil && a.HTTP == 200 && a.Allowed && a.Patched {
				ordinaryMs = append(ordinaryMs, float64(a.Duration.Microseconds())/1000)
				return
			}
			ordinaryBad.Add(1)
			if len(firstBad) < 3 {
				firstBad = append(firstBad, fmt.Sprintf("%v %d %d %q", err, a.HTTP, a.Code, a.Message))
			}
		})
	}
	tick.Stop()
	ordinaryWG.Wait()
	stop()
	fatWG.Wait()

	sort.Float64s(ordinaryMs)
	fmt.Printf("hostile: %-28s ordinary: %d of %d evaluated, %d refused or failed %v; p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", class,
		len(ordinaryMs), fatOrdinary, ordinaryBad.Load(), firstBad,
		percentile(ordinaryMs, 0.5), percentile(ordinaryMs, 0.99), percentile(ordinaryMs, 1))
	fmt.Printf("hostile: %-28s fat: %d answered: %d mutated, %d refused busy (429), %d otherwise, %d not HTTP 200, %d client errors\n", class,
		fatSent, fatMutated, fatBusy, fatOther, fatNot200, fatErrs)
	check(t, class, "every ordinary review evaluated, mutated", ordinaryBad.Load() == 0, fmt.Sprintf("(%d of %d)", len(ordinaryMs), fatOrdinary))
	check(t, class, "every fat answer a review at HTTP 200", fatNot200 == 0 && fatErrs == 0 && fatOther == 0,
		fmt.Sprintf("(%d not 200, %d errors, %d otherwise)", fatNot200, fatErrs, fatOther))
	check(t, class, "the flood was busy: some fat reviews refused", fatBusy > 0, fmt.Sprintf("(%d refused)", fatBusy))
	// What the client sees on a shared machine: printed above, bounded
	// loosely (the chart's timeoutSeconds).
	bound(t, class, "ordinary p99", percentile(ordinaryMs, 0.99), 5000, "ms")
}
