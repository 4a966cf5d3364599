// Package failure says why an operation failed, once for the whole
// pipeline: the kinds of cause (Classify) with the fix an admin can apply,
// which of them are worth a retry (Transient), the errors the copy and the
// summary share (RegistryError, DigestError, MissingError, StoppedError),
// and the message a user reads, with credentials redacted (Message, Redact).
//
// It may import imageset/release and registryapi.
package failure
