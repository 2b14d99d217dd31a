//go:build !unix

package loadgen

import "time"

// selfUsage is unavailable without getrusage: the report shows zeros.
func selfUsage() (time.Duration, int64) { return 0, 0 }
