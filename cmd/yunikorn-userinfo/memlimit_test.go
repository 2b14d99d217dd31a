package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestGoMemoryLimit: the Go runtime's limit leaves room for what the watch
// caches hold off its heap, down to a quarter of the limit.
func TestGoMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	assert.Equal(t, int64(204*mib), goMemoryLimit(204*mib, 0))
	assert.Equal(t, int64(144*mib), goMemoryLimit(204*mib, 60*mib))
	assert.Equal(t, int64(51*mib), goMemoryLimit(204*mib, 500*mib))
}
