"""Where the fused model's photographs and recordings come from: Debian bookworm
packages, unpacked (dpkg-deb -x) into one folder (training/train_av.sh), never shipped.

A source is (class, package, glob under the unpacked root, kind); every file it matches is
one photograph or one recording. Each file belongs to a group, the unit of the train/test
split: a tuxpaint stamp (its photograph and its sound share the stamp's name and so the
split), a recording without its take number (Water1..Water5 are one), a language of
tuxpaint's spoken descriptions (its speakers), one photograph otherwise. A group is test
when the hash of its name says so (a quarter of them), or when TEST_GROUPS names it;
TRAIN_GROUPS keeps near-duplicates (two shots of the same scene) in train together.
"""

import fnmatch
import glob
import hashlib
import os
import re

from conytrain.av import rcc
from conytrain.data import reserved

CLASSES = ["talking", "music", "noise", "animal", "quiet"]

TUX = "usr/share/tuxpaint/stamps"
CV = "usr/share/doc/opencv-doc"
SK = "usr/lib/python3/dist-packages/skimage/data"
GAMES = "usr/share/games"
RCC_DIR = "usr/share/gcompris-qt/rcc-unpacked"
GC = f"{RCC_DIR}/gcompris/src/activities"
# gcompris-qt-data's resource files whose photographs are used (each file's licence is in
# its activity's resource README, Wikimedia Commons: public domain, CC0, CC BY, CC BY-SA).
RCC = ["explore_world_music", "explore_farm_animals", "explore_world_animals",
       "explore_monuments"]
BG = "usr/share/backgrounds"

# (class, package, glob, kind): kind "photo" (a whole picture), "cutout" (a stamp with a
# transparent background, composited on a background), "sound", "speech" (tuxpaint's
# spoken descriptions, grouped by language).
SOURCES = [
    # talking: people (photographs of people, tuxpaint's spoken descriptions)
    ("talking", "python3-skimage", f"{SK}/astronaut.png", "photo"),
    ("talking", "python3-skimage", f"{SK}/camera.png", "photo"),
    ("talking", "opencv-doc", f"{CV}/examples/data/messi5.jpg", "photo"),
    ("talking", "opencv-doc", f"{CV}/examples/data/basketball1.png", "photo"),
    ("talking", "opencv-doc", f"{CV}/examples/data/basketball2.png", "photo"),
    ("talking", "opencv-doc", f"{CV}/opencv4/html/studentsSample_input.jpg", "photo"),
    ("talking", "opencv-doc", f"{CV}/opencv4/html/Background_Subtraction_Tutorial_frame.jpg", "photo"),
    ("talking", "opencv-doc", f"{CV}/opencv4/html/face_swapped.jpg", "photo"),
    ("talking", "opencv-doc", f"{CV}/opencv4/html/example.jpg", "photo"),
    ("talking", "opencv-doc", f"{CV}/opencv4/html/person_multi_det.jpg", "photo"),
    ("talking", "python-matplotlib-data",
     "usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg", "photo"),
    ("talking", "tuxpaint-stamps-default", f"{TUX}/people/fireman*.png", "cutout"),
    ("talking", "tuxpaint-stamps-default", f"{TUX}/**/*_desc*.ogg", "speech"),
    # music: instruments; game music
    ("music", "tuxpaint-stamps-default", f"{TUX}/hobbies/music/**/*.png", "cutout"),
    ("music", "gcompris-qt-data", f"{GC}/explore_world_music/resource/music/*.webp", "photo"),
    ("music", "colobot-common-sounds", f"{GAMES}/colobot/music/*.ogg", "sound"),
    ("music", "extremetuxracer-data", f"{GAMES}/etr/music/*.ogg", "sound"),
    ("music", "frozen-bubble-data", f"{GAMES}/frozen-bubble/snd/*zik*.ogg", "sound"),
    # noise: vehicles and machines; traffic, trains, industry, fire, water, appliances
    ("noise", "tuxpaint-stamps-default", f"{TUX}/vehicles/**/*.png", "cutout"),
    ("noise", "tuxpaint-stamps-default", f"{TUX}/household/*.png", "cutout"),
    ("noise", "python3-skimage", f"{SK}/motorcycle_left.png", "photo"),
    ("noise", "python3-skimage", f"{SK}/motorcycle_right.png", "photo"),
    ("noise", "python3-skimage", f"{SK}/rocket.jpg", "photo"),
    ("noise", "opencv-doc", f"{CV}/opencv4/html/pexels_double_decker_bus.jpg", "photo"),
    ("noise", "opencv-doc", f"{CV}/opencv4/html/bus_det.jpg", "photo"),
    ("noise", "opencv-doc", f"{CV}/opencv4/html/black_car.jpg", "photo"),
    ("noise", "tuxpaint-stamps-default", f"{TUX}/household/*.ogg", "sound"),
    ("noise", "lincity-ng-data", f"{GAMES}/lincity-ng/sounds/*.wav", "sound"),
    ("noise", "minetest-data", f"{GAMES}/minetest/games/minetest_game/mods/*/sounds/*.ogg", "sound"),
    ("noise", "extremetuxracer-data", f"{GAMES}/etr/sounds/*_slide.wav", "sound"),
    # animal: tuxpaint's animal stamps (photograph and call), opencv's and skimage's animals
    ("animal", "tuxpaint-stamps-default", f"{TUX}/animals/**/*.png", "cutout"),
    ("animal", "tuxpaint-stamps-default", f"{TUX}/animals/**/*.ogg", "sound"),
    ("animal", "python3-skimage", f"{SK}/chelsea.png", "photo"),
    ("animal", "opencv-doc", f"{CV}/examples/data/baboon.jpg", "photo"),
    ("animal", "opencv-doc", f"{CV}/examples/data/squirrel_cls.jpg", "photo"),
    ("animal", "opencv-doc", f"{CV}/examples/data/HappyFish.jpg", "photo"),
    ("animal", "opencv-doc", f"{CV}/examples/data/chicky_512.png", "photo"),
    ("animal", "opencv-doc", f"{CV}/opencv4/html/cat_det.jpg", "photo"),
    ("animal", "gcompris-qt-data", f"{GC}/explore_farm_animals/resource/animals/*.webp", "photo"),
    ("animal", "gcompris-qt-data", f"{GC}/explore_world_animals/resource/animals/*.webp", "photo"),
    # quiet: nothing happening: empty scenes and still objects; the noise recordings 60 to
    # 90 dB down and synthesised room floors (media.quiet_clip)
    *[("quiet", "python3-skimage", f"{SK}/{n}", "photo") for n in (
        "grass.png", "gravel.png", "brick.png", "moon.png", "hubble_deep_field.jpg",
        "coffee.png", "coins.png")],
    *[("quiet", "opencv-doc", f"{CV}/examples/data/{n}", "photo") for n in (
        "starry_night.jpg", "building.jpg", "home.jpg", "board.jpg", "aloeL.jpg",
        "leuvenA.jpg", "graf1.png", "box_in_scene.png", "fruits.jpg", "apple.jpg",
        "orange.jpg", "smarties.png", "stuff.jpg")],
    *[("quiet", "opencv-doc", f"{CV}/opencv4/html/{n}", "photo") for n in (
        "astra_color.jpg", "budapest.jpg", "boat.jpg")],
    ("quiet", "opencv-doc", f"{CV}/examples/alphamat/input_images/plant.jpg", "photo"),
    # monuments and buildings (no crowd in front), plants, landscapes, still objects
    ("quiet", "gcompris-qt-data", f"{GC}/explore_monuments/resource/*/*.webp", "photo"),
    *[("quiet", "mate-backgrounds", f"{BG}/mate/nature/{n}.jpg", "photo") for n in (
        "Blinds", "Dune", "FreshFlower", "Garden", "GreenMeadow", "RainDrops", "TwoWings",
        "Wood", "YellowFlower")],
    *[("quiet", "lomiri-wallpapers-16.04", f"{BG}/{n}.jpg", "photo") for n in (
        "Picture_0B_by_freespace", "Picture_1A_by_freespace", "Wine_by_Jakkub_Mede",
        "aitzgorri_by_Aitzol_Berasategi", "picosdeeuropa_by_Aitzol_Berasategi",
        "seeding_by_Clements_Engelhardt", "sunset_by_Aitzol_Berasategi")],
]

# Photo set 2 (issue 54 item 2; models/av/EXPERIMENTS.md, rule 21): more photographs,
# split by group as the rest. Photographs only, so the sound clips and their seeded
# draws are those of set 1 (build.py draws the clips before the shots). From
# gcompris-qt-data's erase and categorization activities (each folder's README: Wikimedia
# Commons, public domain, CC0, CC BY, CC BY-SA), kphotoalbum's demo album (GPL-2+; the
# four photographs its index.xml rotates are left out), Plasma's avatar photographs
# (CC0-1.0, each file's metadata) and GNOME's account pictures (gnome-control-center-data).
# photo_survey.tsv beside this file lists every set the 2026-12-05 survey looked at,
# usable or rejected (drawings, renders), with its licence, so it need not be redone.
RCC2 = ["erase", "categorization"]
CATEGORIES = f"{RCC_DIR}/gcompris/src/activities/categorization/resource/images"
ERASE = f"{RCC_DIR}/gcompris/src/activities/erase/resource"
KPA = "usr/share/kphotoalbum/demo"
AVATARS = "usr/share/plasma/avatars/photos"
FACES = "usr/share/pixmaps/faces"
SOURCES2 = [
    *[("talking", "kphotoalbum", f"{KPA}/{n}.jpg", "photo") for n in (
        "anne_helene", "bar55", "bar55_2", "cold_water", "grand_canyon_2", "jesper",
        "jesper_2", "new_wave_2", "pool", "qt-logo")],
    ("music", "gnome-control-center-data", f"{FACES}/guitar2.jpg", "photo"),
    ("noise", "plasma-workspace-data", f"{AVATARS}/Car.png", "photo"),
    ("noise", "plasma-workspace-data", f"{AVATARS}/Shuttle.png", "photo"),
    ("noise", "gnome-control-center-data", f"{FACES}/plane.jpg", "photo"),
    ("noise", "gnome-control-center-data", f"{FACES}/surfer.jpg", "photo"),
    ("noise", "gcompris-qt-data", f"{CATEGORIES}/renewable/dam1.webp", "photo"),
    ("noise", "gcompris-qt-data", f"{CATEGORIES}/renewable/geothermal.webp", "photo"),
    ("animal", "gcompris-qt-data", f"{ERASE}/*.webp", "photo"),
    ("animal", "gcompris-qt-data", f"{CATEGORIES}/fishes/*.webp", "photo"),
    *[("animal", "kphotoalbum", f"{KPA}/{n}.jpg", "photo") for n in (
        "blackie", "donna", "donna_2", "spiff", "spiff_2")],
    *[("animal", "plasma-workspace-data", f"{AVATARS}/{n}.png", "photo") for n in (
        "Cat", "Chameleon", "Dog", "Fish", "Owl", "Parrot")],
    *[("animal", "gnome-control-center-data", f"{FACES}/{n}.jpg", "photo") for n in (
        "cat", "hummingbird")],
    # still objects and tools, solar cookers and panels outdoors (not the calm dams and
    # the wind turbines: water and turning blades are not "nothing happening")
    ("quiet", "gcompris-qt-data", f"{CATEGORIES}/others/*.webp", "photo"),
    ("quiet", "gcompris-qt-data", f"{CATEGORIES}/tools/*.webp", "photo"),
    ("quiet", "gcompris-qt-data", f"{CATEGORIES}/renewable/solar*.webp", "photo"),
    *[("quiet", "kphotoalbum", f"{KPA}/{n}.jpg", "photo") for n in (
        "grand_canyon_3", "skagen", "skagen_2", "sunset")],
    *[("quiet", "plasma-workspace-data", f"{AVATARS}/{n}.png", "photo") for n in (
        "Air Balloon", "Books", "Brushes", "Bulb", "Cocktail", "Gamepad", "Pancakes",
        "Pencils", "Soccer", "Sunflower", "Sushi")],
    *[("quiet", "gnome-control-center-data", f"{FACES}/{n}.jpg", "photo") for n in (
        "bicycle", "book", "calculator", "coffee2", "flower2", "gamepad", "mountain",
        "tomatoes", "tree", "headphones")],
]
PHOTO_SETS = (1, 2)

# Sound set 2 (issue 54; models/av/EXPERIMENTS.md, rule 22): game and menu music of ten
# more packages, for the music that set 1's three soundtracks do not cover. They are the
# audio data set's music packages (training/conytrain/data/: versions 2, 11 and 12), less
# singularity-music, which is an evaluation package of rule 11. Recordings only, drawn
# after set 1's clips from a random stream of their own, so every clip and shot of set 1
# stays as it was. A track is a group; at most MUSIC2_TRACKS a package, evenly spaced in
# name order, so no one game fills the class.
W16 = "usr/share/games/wesnoth/1.16/data/core/music"
SOUNDS2 = [
    ("music", "wesnoth-1.16-music", f"{W16}/*.ogg", "sound"),
    ("music", "fillets-ng-data", f"{GAMES}/fillets-ng/music/*.ogg", "sound"),
    ("music", "hyperrogue-music", "usr/share/hyperrogue/music/*.ogg", "sound"),
    ("music", "ardentryst", f"{GAMES}/ardentryst/Music/*.ogg", "sound"),
    ("music", "etw-data", f"{GAMES}/etw/music/*.wav", "sound"),
    ("music", "starfighter-data", "usr/share/starfighter/music/*.ogg", "sound"),
    ("music", "pushover-data", "usr/share/pushover/themes/*.ogg", "sound"),
    ("music", "planetblupi-music-ogg", "usr/share/planetblupi/music/*.ogg", "sound"),
    ("music", "drascula-music", "usr/share/scummvm/drascula/audio/track*.ogg", "sound"),
    ("music", "btanks-data", f"{GAMES}/btanks/data/tunes/*.ogg", "sound"),
]
MUSIC2_TRACKS = 12
SOUND_SETS = (1, 2)


def sources_of(photo_set=1):
    """The (class, package, glob, kind) sources and gcompris-qt-data resource files of a
    photo set."""
    if photo_set not in PHOTO_SETS:
        raise ValueError(f"photo set {photo_set}: none such (sets {PHOTO_SETS})")
    return (SOURCES, RCC) if photo_set == 1 else (SOURCES + SOURCES2, RCC + RCC2)


# Files a source's glob matches that are not of its class or not usable.
EXCLUDE = ["*/cartoon/*", "*/emergency/*",   # drawings; sirens are alarms, not a class here
           "*_mirror.png"]                    # mirrored duplicates of a stamp
# tuxpaint household stamps that make a noise (the rest are tools and dishes).
NOISY_HOUSEHOLD = {"kettle", "toilet", "pressure_cooker", "cementmixer", "garbagecan",
                   "wheelie_bin", "pasta_pot", "Washing-machine", "vacuum_cleaner", "saw"}
# Animal-stamp sounds that are placeholders or silent (the audio data set drops them too).
SILENT = {"giraffe", "iguana", "nandou", "wombat"}
# minetest's sounds that are steady noises (footsteps, doors and digging are not).
MINETEST_NOISE = re.compile(r"(env_sounds_(water|lava)|fire_(fire|large|small)|"
                            r"carts_cart_moving|tnt_gunpowder_burning)")
LINCITY_SKIP = re.compile(r"(Window|Click|Raze|Build|School|University|Health|Monument\d|"
                          r"MarketLow|Commune|Shanty|Residential|FireStation|Green|Farm|"
                          r"SubstationO|RocketExplosion)")

TEST_GROUPS = {
    "lang:be", "lang:da", "lang:el",                         # as the audio data set
    "photo:camera", "photo:face_swapped", "photo:studentsSample_input",
    "photo:Background_Subtraction_Tutorial_frame",
    "stamp:violin", "stamp:trumpet", "stamp:drum_tomtom_floor",
}
TRAIN_GROUPS = {"photo:basketball1", "photo:basketball2", "stamp:fireman200b",
                "stamp:fireman240a", "photo:motorcycle_left", "photo:motorcycle_right"}


VAL_GROUPS = {"photo:grace_hopper"}      # the one new photograph of people: val needs one


def _excluded(path):
    return any(fnmatch.fnmatch(path, p) for p in EXCLUDE)


def group_of(cls, kind, path):
    """The split unit of one file (see the module's docstring)."""
    base = os.path.basename(path)
    stem = os.path.splitext(base)[0]
    if kind == "speech":
        m = re.search(r"_desc(?:_([A-Za-z_]+))?\.ogg", base)
        return f"lang:{m.group(1) or 'en'}"
    if path.startswith(TUX) or "/tuxpaint/" in path:
        return f"stamp:{stem}"
    if kind == "sound":
        return f"rec:{re.sub(r'[._]?[0-9]+$', '', stem)}"
    if f"/{KPA}/" in "/" + path:            # bar55 and bar55_2: one scene, one group
        stem = re.sub(r"_[0-9]+$", "", stem)
    return f"photo:{stem}"


def split_of(group):
    """test (a quarter, as in runs 1 to 4), val (an eighth: h % 8 == 1) or train."""
    if group in TEST_GROUPS:
        return "test"
    if group in TRAIN_GROUPS:
        return "train"
    if group in VAL_GROUPS:
        return "val"
    h = int(hashlib.sha256(group.encode()).hexdigest()[:8], 16)
    return "test" if h % 4 == 0 else "val" if h % 8 == 1 else "train"


def prepare(root, names=None):
    """Unpacks gcompris-qt-data's resource files @names (default RCC) into ROOT/RCC_DIR
    once."""
    dest = os.path.join(root, RCC_DIR)
    for name in names or RCC:
        if os.path.isdir(os.path.join(dest, "gcompris", "src", "activities", name)):
            continue
        src = os.path.join(root, "usr", "share", "gcompris-qt", "rcc", f"{name}.rcc")
        if not os.path.exists(src):
            raise RuntimeError(f"{src}: missing (unpack Debian's gcompris-qt-data)")
        rcc.unpack(src, dest)


def _usable(cls, kind, rel):
    base = os.path.basename(rel)
    stem = os.path.splitext(base)[0]
    if _excluded("/" + rel):
        return False
    if "/household/" in rel and stem not in NOISY_HOUSEHOLD:
        return False
    if kind == "sound" and "/tuxpaint/" in "/" + rel and "_desc" in base:
        return False
    if kind == "sound" and "/animals/" in rel and stem in SILENT:
        return False
    if "/minetest/" in rel and not MINETEST_NOISE.search(base):
        return False
    if "/lincity-ng/" in rel and LINCITY_SKIP.search(base):
        return False
    return True


def added_sounds(sound_set=1):
    """The sources sound set @sound_set adds to set 1's (SOUNDS2)."""
    if sound_set not in SOUND_SETS:
        raise ValueError(f"sound set {sound_set}: none such (sets {SOUND_SETS})")
    return [] if sound_set == 1 else SOUNDS2


def _matches(root, pkg, pattern):
    hits = sorted(glob.glob(os.path.join(root, pattern), recursive=True))
    if not hits:
        raise RuntimeError(f"{pattern}: nothing under {root} (unpack Debian's {pkg})")
    return hits


def evenly(paths, n):
    """At most n of @paths, evenly spaced (the first always kept)."""
    if len(paths) <= n:
        return paths
    return [paths[i * len(paths) // n] for i in range(n)]


def collect(root, photo_set=1, sound_set=1):
    """Every usable file under root of @photo_set's sources and @sound_set's added
    recordings: a list of dicts (cls, package, path (absolute), rel, kind, group, split,
    sound_set: 2 for an added recording, else 1), sorted by path within each source; a
    source that matches nothing is an error naming its package and glob."""
    chosen, names = sources_of(photo_set)
    prepare(root, names)
    out, seen = [], set()
    for cls, pkg, pattern, kind in chosen:
        for p in _matches(root, pkg, pattern):
            rel = os.path.relpath(p, root)
            if rel in seen or not _usable(cls, kind, rel):
                continue
            seen.add(rel)
            out.append(_item(cls, pkg, p, rel, kind, group_of(cls, kind, rel), 1))
    for cls, pkg, pattern, kind in added_sounds(sound_set):
        for p in evenly(_matches(root, pkg, pattern), MUSIC2_TRACKS):
            stem = os.path.splitext(os.path.basename(p))[0]
            out.append(_item(cls, pkg, p, os.path.relpath(p, root), kind,
                             f"track:{pkg}:{stem}", sound_set))
    return out


def _item(cls, pkg, path, rel, kind, group, sound_set):
    return dict(cls=cls, package=pkg, path=path, rel=rel, kind=kind, group=group,
                split=split_of(group), sound_set=sound_set)


def packages(photo_set=1, sound_set=1):
    """The Debian packages the sources of @photo_set and @sound_set name; refuses any
    reserved for evaluation."""
    names = sorted({s[1] for s in sources_of(photo_set)[0] + added_sounds(sound_set)})
    reserved.refuse(names, "the fused model's sources")
    return names
