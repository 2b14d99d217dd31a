package hostile

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The mixed load: requests arrive at mixedRate a second for mixedFor,
// as the API server sends them (HTTP/1.1, a connection per call in
// flight), whether or not the earlier ones were answered.
const (
	mixedRate = 50
	mixedFor  = 3 * time.Second
	// mixedWindows is how many windows of mixedFor the bounded phase
	// runs: the bound applies to the median of their p99s, so that one
	// window disturbed by the other jobs of a shared machine does not
	// decide it (every window is printed).
	mixedWindows = 3
)

// mixedResult is what one phase measured.
type mixedResult struct {
	ordinary, heavy        []float64 // ms, sorted, of the mutated answers
	failed, busy, heavyBad int
}

// mixedPhase sends mixedRate requests a second for mixedFor; when heavy is
// set, every tenth is it (a 3 MiB review), the others ordinary reviews.
func mixedPhase(t *testing.T, s *server, heavy []byte) mixedResult {
	t.Helper()
	client := s.apiClient()
	defer client.CloseIdleConnections()
	var (
		mu  sync.Mutex
		res mixedResult
		wg  sync.WaitGroup
	)
	tick := time.NewTicker(time.Second / mixedRate)
	defer tick.Stop()
	for i := range int(mixedFor.Seconds() * mixedRate) {
		<-tick.C
		isHeavy := heavy != nil && i%10 == 9
		wg.Go(func() {
			body := heavy
			if !isHeavy {
				body = podReview("mixed-"+strconv.Itoa(i), "alice", "", "", "")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			a, err := s.reviewWith(ctx, client, body)
			ok := err == nil && a.HTTP == 200 && a.Allowed && a.Patched
			ms := float64(a.Duration.Microseconds()) / 1000
			mu.Lock()
			defer mu.Unlock()
			switch {
			case isHeavy && ok:
				res.heavy = append(res.heavy, ms)
			case isHeavy && err == nil && a.HTTP == http.StatusServiceUnavailable:
				res.busy++
			case isHeavy:
				res.heavyBad++
			case ok:
				res.ordinary = append(res.ordinary, ms)
			default:
				res.failed++
				if res.failed <= 3 {
					fmt.Printf("hostile: mixed load: ordinary review failed: %v %+v\n", err, a)
				}
			}
		})
	}
	wg.Wait()
	sort.Float64s(res.ordinary)
	sort.Float64s(res.heavy)
	return res
}

func (r mixedResult) print(class, what string) {
	fmt.Printf("hostile: %-28s %-30s ordinary: %4d, p50 %6.1f ms, p99 %6.1f ms, max %6.1f ms", class, what,
		len(r.ordinary), percentile(r.ordinary, 0.5), percentile(r.ordinary, 0.99), percentile(r.ordinary, 1))
	if len(r.heavy)+r.busy+r.heavyBad > 0 {
		fmt.Printf("; heavy: %d mutated (p50 %.0f ms, max %.0f ms), %d 503", len(r.heavy), percentile(r.heavy, 0.5), percentile(r.heavy, 1), r.busy)
	}
	fmt.Println()
}

// Class 7: one tenant's heavy objects among everyone's ordinary reviews.
// 50 requests a second, first ordinary reviews only, then with every
// tenth a 3 MiB Pod (the API server's request limit). Large requests hold
// at most --max-concurrent-large (default: 1 of the 2 --instances) slots,
// so the ordinary reviews' p99 stays under ordinaryBound (in the median of
// mixedWindows windows). For comparison, the same load on a serve whose
// large requests may take every slot (--max-concurrent-large=2), the
// behaviour before the reserve; its figures are printed, not bounded.
// Both servers are fresh and configured alike but for that flag.
func mixedLoad(t *testing.T) {
	const class = "mixed-load"
	// A fresh serve, like the one without the reserve below: the server
	// the other classes attacked carries their heap (the metric-label and
	// huge-object classes leave it near its Go memory limit, where the
	// collector runs all the time), which would be compared, not the
	// reserve.
	s := startServe(t, "--instances", "2")
	heavy := podReview("heavy", "alice", "", annotations(230_000), "")
	fmt.Printf("hostile: %-28s %d requests/s for %s, HTTP/1.1; heavy: %.1f MiB\n", class, mixedRate, mixedFor, float64(len(heavy))/(1<<20))

	base := mixedPhase(t, s, nil)
	base.print(class, "ordinary only")
	check(t, class, "ordinary only: every review mutated", base.failed == 0, fmt.Sprintf("(%d failed)", base.failed))

	var all mixedResult
	var p99s []float64
	for w := range mixedWindows {
		mixed := mixedPhase(t, s, heavy)
		mixed.print(class, fmt.Sprintf("with 10%% heavy, window %d", w+1))
		p99s = append(p99s, percentile(mixed.ordinary, 0.99))
		all.ordinary = append(all.ordinary, mixed.ordinary...)
		all.heavy = append(all.heavy, mixed.heavy...)
		all.failed += mixed.failed
		all.busy += mixed.busy
		all.heavyBad += mixed.heavyBad
	}
	sort.Float64s(all.ordinary)
	sort.Float64s(all.heavy)
	sort.Float64s(p99s)
	all.print(class, "with 10% heavy, all windows")
	check(t, class, "with 10% heavy: every ordinary review mutated", all.failed == 0, fmt.Sprintf("(%d failed)", all.failed))
	check(t, class, "heavy reviews mutated or 503", all.heavyBad == 0 && len(all.heavy) > 0,
		fmt.Sprintf("(%d mutated, %d 503, %d otherwise)", len(all.heavy), all.busy, all.heavyBad))
	bound(t, class, "ordinary p99 with 10% heavy (median window)", p99s[len(p99s)/2], ordinaryBound, "ms")

	noReserve := startServe(t, "--instances", "2", "--max-concurrent-large", "2")
	shared := mixedPhase(t, noReserve, heavy)
	shared.print(class, "with 10% heavy, no reserve")
}
