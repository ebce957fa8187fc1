#!/usr/bin/env bash
# Installs the C libraries Tessera links against (Debian; Ubuntu works with its own
# libjpeg-turbo8-dev). Installs nothing that is already there.
set -euo pipefail

packages=(pkg-config libturbojpeg0-dev libpng-dev libexif-dev liblcms2-dev libzmq3-dev libheif-dev libwebp-dev libcurl4-openssl-dev libtiff-dev libgif-dev libavformat-dev libavcodec-dev libswscale-dev libavutil-dev libaom-dev libjxl-dev libraw-dev)
if apt-cache show libjpeg62-turbo-dev >/dev/null 2>&1; then
    packages+=(libjpeg62-turbo-dev)
else
    packages+=(libjpeg-turbo8-dev)
fi
packages+=("$@")

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}"
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! command -v swift >/dev/null 2>&1; then
    echo "swift is not on PATH: install a Swift 6 toolchain from https://www.swift.org/install/linux/" >&2
    exit 1
fi
