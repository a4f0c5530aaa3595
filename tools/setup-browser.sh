#!/usr/bin/env bash
# A headless Chromium for the website test (tests/test_site.py), found in this order:
#   $COURSE_LIB_CHROMIUM, if set; Debian's `chromium` package (installed here with apt-get when missing and
#   when this is root, as on the course's CI machine); else Playwright's own browser (`playwright install
#   chromium`, what GitHub's Ubuntu runners use: their apt `chromium` is a snap stub that does not run in CI).
# Then a CJK font (fonts-noto-cjk) when none is installed, for the Korean pages.
if [ "${COURSE_LIB_CHROMIUM:-}" = playwright ]; then
  python -m playwright install chromium >/dev/null
elif [ -z "${COURSE_LIB_CHROMIUM:-}" ]; then
  if ! command -v chromium >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing Debian's chromium for the website test"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || \
      { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }
  fi
  if command -v chromium >/dev/null; then
    COURSE_LIB_CHROMIUM=$(command -v chromium)
  else
    echo "setup: no chromium package; using Playwright's browser"
    python -m playwright install chromium >/dev/null
    COURSE_LIB_CHROMIUM=playwright
  fi
fi
export COURSE_LIB_CHROMIUM
# Hangul for the Korean pages' screenshots: Debian's (and Ubuntu's) Noto CJK fonts, or the screenshots show boxes.
if ! fc-list :lang=ko 2>/dev/null | grep -q . && command -v apt-get >/dev/null; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  echo "setup: installing fonts-noto-cjk for the Korean pages"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q fonts-noto-cjk >/dev/null 2>&1 || \
    { $SUDO apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q fonts-noto-cjk >/dev/null; }
fi
