#!/usr/bin/env bash
# Build the labelled audio data set for the default audio model from Debian packages only.
#
#   training/data/build_audio_dataset.sh [OUTDIR] [--data-version N] [--per-class N] [--seed N] [--jobs N] ...
#   training/data/build_audio_dataset.sh --list-packages [ARGS]
#
# The options are build_audio_dataset.py's (--help; training/data/README.md); --data-version N
# builds data set version N (9, 11-15). --list-packages prints the tools and the data packages
# ARGS need, "tool NAME" and "data NAME" one a line, and exits: nothing installed or downloaded.
# OUTDIR defaults to out/audio-dataset (gitignored). Needs root (or apt-get permissions) on a
# Debian bookworm machine that reaches the Debian archive; nothing else from the network.
#  1. installs the tools it needs with apt-get (sox, libsox-fmt-base, espeak-ng, flite,
#     python3-numpy; fluidsynth and the General MIDI sound font fluid-soundfont-gm for
#     --synth-music), only those not yet installed;
#  2. downloads the data packages with `apt-get download` into OUTDIR/.cache/debs (kept; a
#     second run reuses them) and unpacks only the sound files into OUTDIR/.cache/src/<pkg>
#     (the data packages are never installed);
#  3. runs build_audio_dataset.py: OUTDIR/clips/{train,test}/<class>/*.wav (16 kHz mono PCM16),
#     OUTDIR/manifest.csv, OUTDIR/labels.txt, and prints a per-class balance report.
# A missing package or file is an error that names it; the script never builds fewer classes.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT="$REPO/out/audio-dataset"
LIST=0
if [ "${1:-}" = --list-packages ]; then LIST=1; shift; fi
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then OUT=$1; shift; fi
PYARGS=("$@")
PY=/usr/bin/python3

die() { echo "build_audio_dataset: error: $*" >&2; exit 1; }
log() { echo "build_audio_dataset: $*" >&2; }

TOOLS=(sox libsox-fmt-base espeak-ng flite python3-numpy gstreamer1.0-tools gstreamer1.0-plugins-base
       gstreamer1.0-plugins-good
       fluidsynth fluid-soundfont-gm)
DATA=(tuxpaint-stamps-default fillets-ng-data fillets-ng-data-nl wesnoth-1.16-music
      colobot-common-sounds fretsonfire-songs-muldjord frozen-bubble-data
      sound-theme-freedesktop lomiri-sounds
      widelands-data wesnoth-1.16-data lincity-ng-data minetest-data extremetuxracer-data
      oxygen-sounds
      scorched3d-data gnome-shell-pomodoro-data linphone-common lugaru-data
      tuxtype-data twinkle-common megaglest-data
      supertux-data warmux-data openclonk-data freedink-data xmoto-data
      asterisk-core-sounds-en-wav heroes-sound-effects sound-icons openttd-opensfx gcompris-qt-data
      0ad-data warzone2100-music
      qabcs-data micropolis-data minetest-mod-homedecor)
# the packages of the tables of recordings added after version 9 that --data-version N holds
# (conytrain/data/data_versions.py: 11's four, 443 MB; 12's fourteen more, 830 MB; 13's
# twenty-eight more, validation only, 360 MB; 14's four, 83 MB; 15's two more, 9 MB); none
# without it
ADDED=()
ADDED_LIST=$(PYTHONPATH="$REPO/training" "$PY" -m conytrain.data.data_versions --packages \
             "${PYARGS[@]}") || die "bad --data-version (expected one of 9, 11-15)"
[ -z "$ADDED_LIST" ] || mapfile -t ADDED <<< "$ADDED_LIST"
DATA+=("${ADDED[@]}")
# zabbix-frontend-php's (version 15) are MP3, which sox reads with libsox-fmt-mp3
if [[ " ${ADDED[*]} " == *" zabbix-frontend-php "* ]]; then TOOLS+=(libsox-fmt-mp3); fi

# sound files to unpack per data package (tar wildcards; '*' also matches '/')
declare -A PATTERNS=(
  [tuxpaint-stamps-default]="*_desc_??.ogg *_desc.ogg */stamps/animals/*.ogg */stamps/household/*.ogg */stamps/vehicles/emergency/*.ogg"
  [fillets-ng-data]="*/fillets-ng/music/*.ogg */fillets-ng/sound/*/en/*.ogg"
  [fillets-ng-data-nl]="*/fillets-ng/sound/*/nl/*.ogg"
  [wesnoth-1.16-music]="*.ogg"
  [colobot-common-sounds]="*/music/*.ogg"
  [fretsonfire-songs-muldjord]="*/song.ogg"
  [frozen-bubble-data]="*/snd/*zik*.ogg"
  [sound-theme-freedesktop]="*.oga"
  [lomiri-sounds]="*/notifications/*.ogg"
  [widelands-data]="*/data/music/*.ogg */data/sound/animals/*.ogg */data/sound/farm/*.ogg */data/world/critters/duck/*.ogg */data/sound/sawmill/*.ogg */data/sound/mill/*.ogg */data/sound/atlanteans/saw/*.ogg */data/sound/metal/furnace.ogg */data/sound/barbarians/stonegrind.ogg */data/sound/empire/*bubble_*.ogg */data/sound/smiths/sharpening.ogg */data/sound/military/under_attack.ogg"
  [wesnoth-1.16-data]="*/core/sounds/ambient/*.ogg */core/sounds/wolf-growl-*.ogg */1.16/sounds/bell.wav"
  [lincity-ng-data]="*/lincity-ng/sounds/*.wav"
  [minetest-data]="*/sounds/*.ogg"
  [extremetuxracer-data]="*/etr/music/*.ogg */etr/sounds/*_slide.wav"
  [oxygen-sounds]="*/Oxygen-Im-Phone-Ring.ogg"
  # version 3: for training only (build_audio_dataset.py --train-extra)
  [scorched3d-data]="*/data/wav/misc/*.wav */data/wav/movement/*.wav"
  [gnome-shell-pomodoro-data]="*/gnome-pomodoro/sounds/*.ogg"
  [linphone-common]="*/sounds/linphone/*.wav"
  [lugaru-data]="*/lugaru/Sounds/*.ogg"
  [tuxtype-data]="*/tuxtype/sounds/*.wav */tuxtype/sounds/*.ogg"
  [twinkle-common]="*/twinkle/*.wav"
  [megaglest-data]="*/tilesets/*/sounds/* */commondata/sounds/* */units/*/sounds/* */music/*.ogg"
  # version 4: for training only (build_audio_dataset.py --train-only-version 4)
  [supertux-data]="*/supertux2/music/*.ogg */supertux2/sounds/*.wav"
  [warmux-data]="*/warmux/music/*.ogg */sound/default/weapons/*.ogg */sound/default/misc/frog_music.ogg"
  [openclonk-data]="*/Music.ocg/*.ogg"
  [freedink-data]="*/dink/Sound/*.ogg */dink/Sound/fire.wav"
  [xmoto-data]="*/Textures/Musics/*.ogg"
  [asterisk-core-sounds-en-wav]="*/en_US_f_Allison/*.wav"
  [heroes-sound-effects]="*/heroes/sfx/*.wav"
  [sound-icons]="*/sound-icons/canary-long.wav"
  # sounds inside archives, unpacked by unpack_archives.py into <archive>.d/
  [openttd-opensfx]="*/opensfx/opensfx.cat"
  [gcompris-qt-data]="*/rcc/memory-sound.rcc */rcc/explore_farm_animals.rcc */rcc/canal_lock.rcc */rcc/explore_world_music.rcc */rcc/instruments.rcc"
  # version 5: 0 A.D.'s animals, ambiences and music (in a zip); Warzone 2100's music (Opus)
  [0ad-data]="*/mods/public/public.zip"
  [warzone2100-music]="*/warzone2100/music/*.opus"
  # version 7: qABCs' animal and machine recordings, Micropolis' sirens, horns and traffic,
  # the Minetest homedecor mod's bathroom and kitchen sounds
  [qabcs-data]="*/qabcs/abcs/all/noises/*.ogg"
  [micropolis-data]="*/micropolis/res/sounds/*.wav"
  [minetest-mod-homedecor]="*/homedecor/*/sounds/*.ogg"
  # data set version 11 (--data-version 11): music of four more games, for training only
  [hyperrogue-music]="*/hyperrogue/music/*.ogg"
  [naev-data]="*/naev/dat/snd/music/*.ogg"
  [ardentryst]="*/ardentryst/Music/*.ogg"
  [etw-data]="*/etw/music/*.wav"
  # data set version 12 (--data-version 12): noise and music of fourteen more packages, for
  # training only (which files: added_v12.tsv)
  [torcs-data]="*/torcs/data/sound/*.wav */torcs/data/music/*.ogg"
  [searchandrescue-data]="*/searchandrescue/sounds/*.wav */searchandrescue/music/*.wav"
  [btanks-data]="*/btanks/data/sounds/*.ogg */btanks/data/tunes/*.ogg"
  [netpanzer-data]="*/netpanzer/sound/*.wav"
  [dustracing2d-data]="*/dustracing2d/sounds/*.ogg"
  [opencity-data]="*/opencity/sound/*.wav"
  [crrcsim-data]="*/crrcsim/sounds/*.wav"
  [cube2-data]="*/cube2/packages/sounds/*.ogg"
  [gl-117-data]="*/gl-117/sounds/*.wav"
  [starfighter-data]="*/starfighter/music/*.ogg"
  [pushover-data]="*/pushover/themes/*.ogg"
  [singularity-music]="*/singularity/music/*.ogg"
  [planetblupi-music-ogg]="*/planetblupi/music/*.ogg"
  [drascula-music]="*/drascula/audio/track*.ogg"
  # data set version 13 (--data-version 13): validation-only recordings (which files: val_v13.tsv)
  [alienblaster-data]="*/alienblaster/sound/alarm.wav"
  [tumiki-fighters-data]="*/tumiki-fighters/sounds/*"
  [endless-sky-data]="*/endless-sky/sounds/alarm.wav"
  [scratch]="*/scratch/Media/Sounds/*.wav"
  [deepin-sound-theme]="*/sounds/deepin/stereo/*.wav"
  [yaru-theme-sound]="*/sounds/Yaru/stereo/*.oga"
  [pidgin-data]="*/sounds/purple/*.wav"
  [psi-plus-sounds]="*/psi-plus/sound/*.wav"
  [kanagram]="*/kanagram/ui/sounds/*.wav"
  [blinken]="*/blinken/sounds/*.wav"
  [blobwars-data]="*/blobwars/sound/*"
  [stormbaancoureur-data]="*/stormbaancoureur/sounds/*.wav"
  [asterisk-core-sounds-fr-wav]="*/sounds/fr_CA_f_June/*.wav"
  [asterisk-core-sounds-es-wav]="*/sounds/es_MX_f_Allison/*.wav"
  [asterisk-core-sounds-it-wav]="*/sounds/it_IT_m_Carlo/*.wav"
  [asterisk-core-sounds-ru-wav]="*/sounds/ru_RU_f_IvrvoiceRU/*.wav"
  [klettres-data]="*/klettres/*/alpha/*.ogg"
  [gunroar-data]="*/gunroar/sounds/musics/*.ogg"
  [mu-cade-data]="*/mu-cade/sounds/musics/*.ogg"
  [noiz2sa-data]="*/noiz2sa/sounds/*.ogg"
  [parsec47-data]="*/parsec47/sounds/*.ogg"
  [rrootage-data]="*/rrootage/sounds/*.ogg"
  [titanion-data]="*/titanion/sounds/musics/*.ogg"
  [torus-trooper-data]="*/torus-trooper/sounds/musics/*.ogg"
  [chromium-bsu-data]="*/chromium-bsu/wav/music_*.wav"
  [bzflag-data]="*/bzflag/flag_alert.wav"
  [ceferino-data]="*/ceferino/sounds/alarma.wav"
  [mirrormagic-data]="*/mirrormagic/sounds/snd_classic/warnton.wav"
  # data set version 14 (--data-version 14): mined animal calls (which files: added_v14.tsv);
  # UFO:AI keeps its sounds in a zip (.pk3), opened by unpack_archives.py
  [ufoai-sound]="*/base/0snd.pk3"
  [brainparty-data]="*/brainparty/meow.wav"
  [flare-game]="*/soundfx/environment/*.ogg"
  [trophy-data]="*/trophy/sounds/dog.wav"
  # data set version 15 (--data-version 15): mined alarm tones (which files: added_v15.tsv)
  [zabbix-frontend-php]="*/zabbix/audio/alarm_high.mp3 */zabbix/audio/alarm_warning.mp3 */zabbix/audio/alarm_average.mp3"
  [nagstamon]="*/Nagstamon/resources/critical.wav"
)

# version 6: for training only; which files of which package, listed one a line
V6_LIST="$REPO/training/conytrain/data/versions/train_only_v6.tsv"
mapfile -t V6 < <(grep -v '^#' "$V6_LIST" | tail -n +2 | cut -f1 | sort -u)
DATA+=("${V6[@]}")
for p in "${V6[@]}"; do PATTERNS[$p]="(files listed in train_only_v6.tsv)"; done

if [ $LIST = 1 ]; then
  for p in "${DATA[@]}"; do [ -n "${PATTERNS[$p]:-}" ] || die "no files to unpack listed for $p"; done
  printf 'tool %s\n' "${TOOLS[@]}" | sort
  printf 'data %s\n' "${DATA[@]}" | sort
  exit 0
fi

T0=$(date +%s)
command -v apt-get >/dev/null || die "apt-get not found: this script needs a Debian (bookworm) system"

# ---- 1. tools
missing=()
for p in "${TOOLS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
UPDATED=0
apt_update() { [ $UPDATED = 1 ] && return 0; log "apt-get update"; apt-get update -qq || die "apt-get update failed"; UPDATED=1; }
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "need root to apt-get install: ${missing[*]}"
  apt_update
  for p in "${missing[@]}"; do
    apt-cache show "$p" >/dev/null 2>&1 || die "Debian package '$p' is not available from the configured apt sources"
  done
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install failed for: ${missing[*]}"
fi
for c in sox soxi espeak-ng flite gst-launch-1.0 fluidsynth; do command -v $c >/dev/null || die "'$c' not found after installing ${TOOLS[*]}"; done
$PY -c 'import numpy' 2>/dev/null || die "$PY cannot import numpy (package python3-numpy)"

# ---- 2. data packages: download (cached) and unpack the sound files
CACHE="$OUT/.cache"; DEBS="$CACHE/debs"; SRC="$CACHE/src"
# packages reserved for evaluation are never downloaded (DEVELOPERS.md)
PYTHONPATH="$REPO/training" "$PY" -m conytrain.data.reserved "${DATA[@]}" >&2 \
  || die "the data package list names packages reserved for evaluation (above)"
mkdir -p "$DEBS" "$SRC"
todo=()
for p in "${DATA[@]}"; do
  ls "$DEBS/${p}_"*.deb >/dev/null 2>&1 || todo+=("$p")
done
if [ ${#todo[@]} -gt 0 ]; then
  if ! apt-cache show "${todo[0]}" >/dev/null 2>&1; then apt_update; fi
  for p in "${todo[@]}"; do
    apt-cache show "$p" >/dev/null 2>&1 || { apt_update; apt-cache show "$p" >/dev/null 2>&1; } \
      || die "Debian package '$p' is not available from the configured apt sources (needs bookworm 'main')"
  done
  log "downloading ${#todo[@]} data packages: ${todo[*]}"
  # as root apt warns that it cannot drop privileges for a directory _apt cannot write; harmless
  (cd "$DEBS" && apt-get download -q "${todo[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2) || true
  for p in "${todo[@]}"; do
    ls "$DEBS/${p}_"*.deb >/dev/null 2>&1 || die "apt-get download of Debian package '$p' failed"
  done
fi
for p in "${DATA[@]}"; do
  deb=$(ls "$DEBS/${p}_"*.deb | sort | tail -1)
  members=()
  if [[ " ${V6[*]} " == *" $p "* ]]; then
    # the exact members, from the version-6 list (paths may hold spaces)
    grep -v '^#' "$V6_LIST" | awk -F'\t' -v p="$p" '$1 == p { print "./" $3 }' > "$SRC/$p.members"
    members=(--verbatim-files-from -T "$SRC/$p.members")
    key=$(md5sum < "$SRC/$p.members" | cut -c1-8)
  else
    read -r -a pats <<< "${PATTERNS[$p]}"
    members=(--wildcards "${pats[@]}")
    key=$(echo "${PATTERNS[$p]}" | md5sum | cut -c1-8)
  fi
  stamp="$SRC/$p/.unpacked-$(basename "$deb")-$key"
  [ -e "$stamp" ] && continue
  rm -rf "${SRC:?}/$p"; mkdir -p "$SRC/$p"
  log "unpacking $p"
  set +o pipefail
  # (tar stops dpkg-deb with a broken pipe once it has what it needs: only tar's status counts)
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$SRC/$p" "${members[@]}" 2>"$SRC/$p.tar.log" \
    || die "unpacking $p failed: $(grep -v 'Exiting with failure' "$SRC/$p.tar.log" | head -3)"
  set -o pipefail
  n=$(find "$SRC/$p" -type f | wc -l)
  [ "$n" -gt 0 ] || die "no sound files unpacked from $deb (patterns: ${PATTERNS[$p]}; see $SRC/$p.tar.log)"
  $PY "$REPO/training/unpack_archives.py" "$SRC/$p" || die "could not unpack the sound archives of $p"
  touch "$stamp"
done
T1=$(date +%s)
log "tools and data ready in $((T1 - T0)) s"

# ---- 3. cut, synthesise, write manifest and report
$PY "$REPO/training/build_audio_dataset.py" --src "$SRC" --out "$OUT" "${PYARGS[@]}"
T2=$(date +%s)
log "done in $((T2 - T0)) s (packages $((T1 - T0)) s, clips $((T2 - T1)) s); output $OUT ($(du -sh --exclude=.cache "$OUT" | cut -f1) without the .cache of $(du -sh "$CACHE" | cut -f1))"
