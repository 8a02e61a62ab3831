"""Cross-check against the JDK itself: the bytes of FileUtil.writeWithChecksum, readWithChecksum,
CheckpointId.deserialize, Integer.parseInt, Character.isWhitespace / digit and String.getBytes.

A small Java program reproduces the Samza code (FileUtil is Scala, CheckpointId needs commons-lang: their
few lines are copied into it) and answers one question per input line; the tests compare its answers with
statectl's. Compiling and running it takes a couple of seconds. The only test module allowed to skip: it
does when no JDK is installed.
"""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from statectl.formats.checkpoint import SSP, CheckpointFormatError, CheckpointV2, encode_v2, parse_checkpoint_id
from statectl.formats.java import JAVA_INT_MAX, JAVA_INT_MIN, java_digit, java_is_whitespace, java_parse_long, java_utf8
from statectl.formats.offsets import OffsetFileError, decode, encode, offsets_json

JAVA = r"""
import java.io.*;
import java.util.zip.CRC32;

public class SamzaJava {
  static final char[] HEX = "0123456789abcdef".toCharArray();
  static int nibble(String s, int i) { return Character.digit(s.charAt(i), 16); }
  static String str(String hex) {
    char[] out = new char[hex.length() / 4];
    for (int i = 0; i < out.length; i++) {
      out[i] = (char) (nibble(hex, 4 * i) << 12 | nibble(hex, 4 * i + 1) << 8 | nibble(hex, 4 * i + 2) << 4
                       | nibble(hex, 4 * i + 3));
    }
    return new String(out);
  }
  static byte[] bytes(String hex) {
    byte[] out = new byte[hex.length() / 2];
    for (int i = 0; i < out.length; i++) out[i] = (byte) (nibble(hex, 2 * i) << 4 | nibble(hex, 2 * i + 1));
    return out;
  }
  static String hex(byte[] b) {
    char[] out = new char[2 * b.length];
    for (int i = 0; i < b.length; i++) {
      out[2 * i] = HEX[(b[i] >> 4) & 0xF];
      out[2 * i + 1] = HEX[b[i] & 0xF];
    }
    return new String(out);
  }
  static String utf16(String s) {
    char[] out = new char[4 * s.length()];
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      for (int k = 0; k < 4; k++) out[4 * i + k] = HEX[(c >> (12 - 4 * k)) & 0xF];
    }
    return new String(out);
  }
  static long checksum(String data) {  // FileUtil.getChecksum
    CRC32 crc = new CRC32();
    crc.update(data.getBytes());
    return crc.getValue();
  }
  static String write(String data) throws IOException {  // FileUtil.writeWithChecksum, to memory
    ByteArrayOutputStream fos = new ByteArrayOutputStream();
    ObjectOutputStream oos = new ObjectOutputStream(fos);
    oos.writeLong(checksum(data));
    String remaining = data;
    while (remaining.length() >= 64 * 1024) {  // Scala's splitAt(MaxStringSegmentWriteSize - 1)
      oos.writeUTF(remaining.substring(0, 64 * 1024 - 1));
      remaining = remaining.substring(64 * 1024 - 1);
    }
    oos.writeUTF(remaining);
    oos.close();
    return hex(fos.toByteArray());
  }
  static String read(byte[] raw) throws IOException {  // FileUtil.readWithChecksum
    ObjectInputStream ois = new ObjectInputStream(new ByteArrayInputStream(raw));
    long checksumFromFile = ois.readLong();
    String data = ois.readUTF();
    while (ois.available() > 0) data = data + ois.readUTF();
    return checksumFromFile == checksum(data) ? utf16(data) : "NULL";
  }
  static boolean isBlank(String s) {  // commons-lang3 StringUtils.isBlank
    for (int i = 0; i < s.length(); i++) if (!Character.isWhitespace(s.charAt(i))) return false;
    return true;
  }
  static String checkpointId(String id) {  // CheckpointId.deserialize
    if (isBlank(id)) return "ERR";
    String[] parts = id.split("-");
    return Long.parseLong(parts[0]) + "," + Long.parseLong(parts[1]);
  }
  public static void main(String[] args) throws IOException {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "US-ASCII"));
    PrintStream out = new PrintStream(new BufferedOutputStream(System.out), false, "US-ASCII");
    String line;
    while ((line = in.readLine()) != null) {
      String op = line.substring(0, 1), arg = line.substring(2);
      try {
        switch (op) {
          case "W": out.println(write(str(arg))); break;
          case "R": out.println(read(bytes(arg))); break;
          case "C": out.println(checkpointId(str(arg))); break;
          case "I": out.println(Integer.parseInt(str(arg))); break;
          case "B": out.println(hex(str(arg).getBytes())); break;
          case "S": {
            StringBuilder sb = new StringBuilder();
            for (int c = 0; c < 0x10000; c++) {
              if (Character.isWhitespace((char) c)) sb.append(String.format("%04x ", c));
            }
            out.println(sb.toString().trim());
            break;
          }
          case "D": {
            StringBuilder sb = new StringBuilder();
            for (int c = 0; c < 0x10000; c++) {
              int d = Character.digit((char) c, 10);
              if (d >= 0) sb.append(String.format("%04x:%d ", c, d));
            }
            out.println(sb.toString().trim());
            break;
          }
          default: out.println("?");
        }
      } catch (Exception e) {  // NumberFormatException, ArrayIndexOutOfBounds, UTFDataFormatException, EOF...
        out.println("ERR");
      }
    }
    out.flush();
  }
}
"""


def u16(s: str) -> str:
    return s.encode("utf-16-be", "surrogatepass").hex()


def from_u16(h: str) -> str:
    return bytes.fromhex(h).decode("utf-16-be", "surrogatepass")


def _questions() -> list[tuple[str, str]]:
    """Every question the tests below ask, so that one JVM answers them all."""
    damaged = bytearray(encode("4267"))
    damaged[-1] ^= 1
    return ([("W", u16(d)) for d in OFFSET_DATA]
            + [("R", encode(d).hex()) for d in OFFSET_DATA if not _refused(d)] + [("R", bytes(damaged).hex())]
            + [("B", u16(s)) for s in BYTES_CASES]
            + [("C", u16(c)) for c in ID_CASES]
            + [("I", u16(c)) for c in INT_CASES]
            + [("S", ""), ("D", "")])


@pytest.fixture(scope="module")
def java(tmp_path_factory) -> dict[tuple[str, str], str]:
    """The JDK's answer to each of :func:`_questions`."""
    javac, java_bin = shutil.which("javac"), shutil.which("java")
    if not javac or not java_bin:
        pytest.skip("no JDK (javac and java) on PATH: the cross-check against Java cannot run")
    work = tmp_path_factory.mktemp("java")
    (work / "SamzaJava.java").write_text(JAVA)
    subprocess.run([javac, "-encoding", "UTF-8", "-d", str(work), str(work / "SamzaJava.java")], check=True,
                   capture_output=True)
    questions = _questions()
    stdin = "".join(f"{op} {arg}\n" for op, arg in questions)
    done = subprocess.run([java_bin, "-Dfile.encoding=UTF-8", "-cp", str(work), "SamzaJava"],
                          input=stdin, capture_output=True, text=True, check=True)
    answers = done.stdout.splitlines()
    assert len(answers) == len(questions), done.stderr
    return dict(zip(questions, answers, strict=True))


# ---- offset files --------------------------------------------------------------------------------

OFFSET_DATA = [
    "", "0", "4267", "a\x00b", "caf\u00e9 \u20ac", "smile \U0001F600", "\ud800 lone", "\udc00", "\u00e9" * 30000,
    "\u20ac" * 21845,  # exactly 65535 bytes of modified UTF-8: the most one writeUTF takes
    "x" * 1010, "x" * 1014, "x" * 1015, "x" * 1016, "x" * 2038,  # around the 1024-byte block boundary
    "x" * 65534, "x" * 65535, "x" * 65536, "x" * 131070, "x" * 131071, "{" + "x" * 70000 + "}",
    "x" * 65534 + "\U0001F600" + "y",  # the surrogate pair is split between two writeUTF pieces
    "\u00e9" * 65536,  # 131070 bytes in the first piece: more than writeUTF takes
    "\u20ac" * 30000,  # 90 000 bytes in one piece: Java refuses, and so does statectl
    offsets_json({SSP("kafka", "page-views", 3): "4267", SSP("kafka", "a.b\U0001F600", 0): None}),
    encode_v2(CheckpointV2("1614147487244-33577", {"kafka.PageViews.0": "4267"},
                           {"org.apache.samza.storage.blobstore.BlobStoreStateBackendFactory": {"s": "b"}}))
    .decode("utf-8"),
]


def test_offset_files_are_byte_for_byte_javas(java):
    for data in OFFSET_DATA:
        answer = java["W", u16(data)]
        if answer == "ERR":
            with pytest.raises(OffsetFileError):
                encode(data)
        else:
            assert encode(data).hex() == answer, f"{data[:40]!r} ({len(data)} chars)"


def test_java_reads_what_statectl_writes_and_the_other_way_round(java):
    for data in OFFSET_DATA:
        if _refused(data):
            continue
        raw = encode(data)
        assert java["R", raw.hex()] == u16(data)
        assert u16(decode(raw)) == u16(data)
    damaged = bytearray(encode("4267"))
    damaged[-1] ^= 1
    assert java["R", bytes(damaged).hex()] == "NULL"  # Samza's reader discards data whose CRC does not match...
    with pytest.raises(OffsetFileError, match="checksum mismatch"):
        decode(bytes(damaged))  # ...and statectl says so


def _refused(data: str) -> bool:
    try:
        encode(data)
    except OffsetFileError:
        return True
    return False


BYTES_CASES = ["abc", "\u00e9\u20ac", "\U0001F600", "\ud800", "a\udc00b", "\ud83d\ude00", "\ud83d", "\ude00\ud83d"]


def test_checksums_use_javas_bytes_of_the_string(java):
    for s in BYTES_CASES:
        assert java_utf8(s).hex() == java["B", u16(s)], repr(s)


# ---- checkpoint ids and partitions ---------------------------------------------------------------

_FIXED_ID_CASES = [
    "1614147487244-33577", "1-2-3", "+1-2", "+0-+0", "007-1", "1-2-", "1-2--", "-1-2", "1--2", "1", "1-", "-",
    "", " ", "\t1-2", "1-2 ", "1 -2", "1-+", "++1-2", "+-1", "9223372036854775807-1", "9223372036854775808-1",
    "1-9223372036854775807", "1-9223372036854775808", "\u0661-\u0662", "\uff11-2", "\U0001D7CF-2", "\u00b9-2",
    "\u2460-2", "1\u0660-2", "1_0-2", "0x1-2", "1e3-2", "1.5-2", "\u00a0", "\u3000",
]


def _random_ids(n: int) -> list[str]:
    """Strings near the shape of an id: parts of mostly digits (of several scripts), with the odd sign,
    space, dot or non-digit, joined by one or more dashes."""
    rng = random.Random(20240610)
    odd = list("+- \t.e") + ["\u0661", "\uff11", "\U0001D7CF", "\u00b9", "\u3000", "\u00a0", "\u0966"]

    def part() -> str:
        return "".join(rng.choice(odd) if rng.random() < 0.04 else rng.choice("0123456789")
                       for _ in range(rng.randint(0, 19)))

    return ["-" * (rng.random() < 0.1) + "-".join(part() for _ in range(rng.randint(1, 4))) for _ in range(n)]


def _ours(value: str) -> str:
    try:
        millis, n = parse_checkpoint_id(value)
    except CheckpointFormatError:
        return "ERR"
    return f"{millis},{n}"


ID_CASES = _FIXED_ID_CASES + _random_ids(3000)


def test_checkpoint_ids_are_read_as_java_reads_them(java):
    mismatches = [(c, java["C", u16(c)], _ours(c)) for c in ID_CASES if java["C", u16(c)] != _ours(c)]
    assert mismatches == []
    assert sum(java["C", u16(c)] != "ERR" for c in ID_CASES) > 300  # the random ones are not all invalid


INT_CASES = ["0", "7", "+5", "-1", "007", "2147483647", "2147483648", "-2147483648", "-2147483649", "", "+", "-",
             "\u0663", "1 ", "0x1", "\U0001D7CF"]


def test_partitions_are_read_as_integer_parse_int(java):
    for case in INT_CASES:
        ours = java_parse_long(case, minimum=JAVA_INT_MIN, maximum=JAVA_INT_MAX)
        assert (str(ours) if ours is not None else "ERR") == java["I", u16(case)], repr(case)


# ---- the character tables ------------------------------------------------------------------------

def test_whitespace_and_digits_are_javas_over_the_whole_bmp(java):
    spaces, digits = java["S", ""], java["D", ""]
    java_spaces = {int(h, 16) for h in spaces.split()}
    ours = {c for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF and java_is_whitespace(chr(c))}
    assert ours - java_spaces == {0x180E}  # whitespace to Java 8, kept blank on purpose (stricter)
    assert java_spaces - ours == set()
    java_digits = {int(h, 16): int(v) for h, v in (x.split(":") for x in digits.split())}
    ours_digits = {c: java_digit(chr(c)) for c in range(0x10000)
                   if not 0xD800 <= c <= 0xDFFF and java_digit(chr(c)) >= 0}
    assert ours_digits == java_digits
