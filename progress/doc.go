// Package progress shows a run: the status bar on a terminal or the status
// line logged every interval (Meter, a transfer.Progress), and byte counts
// as people read them (HumanBytes). It is the face of the copy engine's
// accounting, for the CLI and the trips' summaries.
//
// It may import failure, imageset and transfer.
package progress
