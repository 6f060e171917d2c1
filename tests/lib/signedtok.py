"""Signed tokens for the tests (imported, not run): the message fenced
signs (docs/security.md, "Signed tokens") and the Ed25519 public key of a
verify.keys file, so that a test checks fenced's signatures with
python3-cryptography rather than with fenced's own code."""
import base64
import struct


def message(key_id, name, token):
    """The bytes fenced signs for lock name's token under key_id (str or
    bytes each)."""
    kid = key_id.encode() if isinstance(key_id, str) else key_id
    nb = name.encode() if isinstance(name, str) else name
    return (b"fenced-token-v1\x00" + bytes([len(kid)]) + kid + struct.pack(">H", len(nb)) + nb
            + struct.pack(">Q", token))


def ed25519_public_key(verify_keys, ed):
    """The first key of the verify.keys file at path verify_keys, as an
    ed (cryptography's ed25519 module) public key."""
    with open(verify_keys) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                _kid, _scheme, k = line.split()
                return ed.Ed25519PublicKey.from_public_bytes(base64.urlsafe_b64decode(k + "="))
    raise RuntimeError("no key in " + verify_keys)
