package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gapmirror/gapmirror/archivesign"
)

// passwordEnv is cosign's: the same variable unlocks the same keys.
const passwordEnv = "COSIGN_PASSWORD"

func newGenerateKeyPairCommand() *cobra.Command {
	var prefix string
	cmd := &cobra.Command{
		Use:   "generate-key-pair [--output-key-prefix cosign]",
		Short: "Make the key pair that signs archives (cosign's format: PREFIX.key, PREFIX.pub)",
		Long: `gapmirror generate-key-pair writes an ECDSA P-256 key pair in cosign's format: PREFIX.key,
the private key encrypted with a password (from COSIGN_PASSWORD, else asked on the terminal),
for mirror-to-disk's --sign-key on the connected side, and PREFIX.pub, the public key, for
--verify-key on the air-gapped side. Existing files are never overwritten. Keys cosign
generate-key-pair made work too, and cosign verify-blob checks gapmirror's signatures.
See docs/archive.md#signed-archives.`,
		Example: `  gapmirror generate-key-pair
  COSIGN_PASSWORD=... gapmirror generate-key-pair --output-key-prefix /secure/gapmirror`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return generateKeyPair(cmd.OutOrStdout(), cmd.ErrOrStderr(), prefix)
		},
	}
	cmd.Flags().StringVar(&prefix, "output-key-prefix", "cosign", "path and name of the files to write, without .key and .pub")
	return cmd
}

// generateKeyPair writes PREFIX.key and PREFIX.pub, refusing to replace either.
func generateKeyPair(out, prompt io.Writer, prefix string) error {
	keyPath, pubPath := prefix+".key", prefix+".pub"
	for _, p := range []string{keyPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s exists: gapmirror never overwrites a key (archives signed with it would no longer verify); move it away or give another --output-key-prefix", p)
		}
	}
	pass, err := keyPassword(prompt, true)
	if err != nil {
		return err
	}
	priv, pub, err := archivesign.GenerateKeyPair(pass)
	if err != nil {
		return err
	}
	if err := writeNew(keyPath, priv, 0o600); err != nil {
		return err
	}
	if err := writeNew(pubPath, pub, 0o644); err != nil {
		os.Remove(keyPath)
		return err
	}
	fmt.Fprintf(out, "private key written to %s: keep it on the connected side (mirror-to-disk --sign-key %s)\n", keyPath, keyPath)
	fmt.Fprintf(out, "public key written to %s: carry it to the air gap once (disk-to-mirror --verify-key %s)\n", pubPath, pubPath)
	return nil
}

// writeNew creates p with b, failing if p exists.
func writeNew(p string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(p)
		return fmt.Errorf("writing %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(p)
		return fmt.Errorf("writing %s: %w", p, err)
	}
	return nil
}

// keyPassword is COSIGN_PASSWORD when set (even empty, as cosign takes
// it), else asked on the terminal (twice when confirm).
func keyPassword(prompt io.Writer, confirm bool) ([]byte, error) {
	if p, ok := os.LookupEnv(passwordEnv); ok {
		return []byte(p), nil
	}
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return nil, errors.New("no password: set " + passwordEnv + " (not a terminal to ask on)")
	}
	fmt.Fprint(prompt, "Enter password for private key: ")
	p, err := term.ReadPassword(fd)
	fmt.Fprintln(prompt)
	if err != nil {
		return nil, fmt.Errorf("reading the password: %w", err)
	}
	if confirm {
		fmt.Fprint(prompt, "Enter password for private key again: ")
		again, err := term.ReadPassword(fd)
		fmt.Fprintln(prompt)
		if err != nil {
			return nil, fmt.Errorf("reading the password: %w", err)
		}
		if string(again) != string(p) {
			return nil, errors.New("the passwords do not match")
		}
	}
	return p, nil
}

// loadSignKey reads --sign-key, asking for its password only if it is encrypted.
func loadSignKey(path string, prompt io.Writer) (*archivesign.Signer, error) {
	if path == "" {
		return nil, nil
	}
	return archivesign.LoadSigner(filepath.Clean(path), func() ([]byte, error) { return keyPassword(prompt, false) })
}

// loadVerifyKey reads --verify-key (nil without one).
func loadVerifyKey(path string) (*archivesign.Verifier, error) {
	if path == "" {
		return nil, nil
	}
	return archivesign.LoadVerifier(filepath.Clean(path))
}
