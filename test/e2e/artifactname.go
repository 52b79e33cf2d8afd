package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// maxArtifactName is the longest directory name sanitize returns, well
// under the 255 bytes of a file name on Linux and macOS file systems.
const maxArtifactName = 120

// sanitize turns a test's name into the name of its artifacts directory: the
// characters a file name should not hold become "_", and a name longer than
// maxArtifactName keeps its start and ends in a hash of the whole, so that
// two long names with the same start stay apart.
func sanitize(name string) string {
	s := strings.Trim(unsafeChars.ReplaceAllString(name, "_"), "_")
	if len(s) <= maxArtifactName {
		return s
	}
	sum := sha256.Sum256([]byte(name))
	h := hex.EncodeToString(sum[:])[:12]
	return strings.TrimRight(s[:maxArtifactName-len(h)-1], "_") + "-" + h
}
