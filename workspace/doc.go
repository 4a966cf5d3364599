// Package workspace holds every record a run keeps for later runs, in the
// working-dir beside an archive or under --workspace: the Plan a run
// executes and the files it carries, the run and failure records
// (--retry-failed), what archives were written and applied, what each
// mirror root holds (prune and delete read it), the locks that keep two
// runs off one workspace or store, and the description `describe` prints.
//
// Stage: records, beside the copy engine; the trips (mirror) read and
// write them. Every record is JSON, written atomically and versioned: a
// reader refuses a record of a newer format and takes every older one.
//
// It may import archive, imageset and imageset/release; never the copy
// engine or the trips.
package workspace
