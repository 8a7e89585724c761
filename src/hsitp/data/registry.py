"""Registry of the nine hyperspectral scenes: files, checksums, grids, classes, bands, terms.

Facts come from ``../shared/datasets/README.md`` (checked there against real files where it says so). A fact that
the shared README does not confirm is listed in ``DatasetSpec.unverified`` with where it comes from, and ``verified``
is False when the grid or class counts are among them. No wavelength table is included: none of the sources checked
gives the sensors' band centres for these files, so ``wavelengths_nm`` is None rather than an invented table.

The cost model reads ``rows, cols, bands`` from here, so its tables never depend on what is cached locally.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import urlparse

from hsitp.errors import HsitpError

_T = TypeVar("_T")

GIC_BASE = "https://www.ehu.eus/ccwintco/uploads/"
GIC_PAGE = "https://www.ehu.eus/ccwintco/index.php/Hyperspectral_Remote_Sensing_Scenes"
# Where the published sha256/sizes of the GIC files come from (as recorded in the shared README).
GIC_HASH_SOURCE = (
    "published sha256 of the GIC file: fsantibanezleal/CAOS_LDA_HSI local_dataset_inventory.json, agreeing with "
    "Git LFS pointers in utat-ss/FINCH-destriping and hxlnwpu/Hyperspectral_image_classification (shared README)"
)


class UnknownDatasetError(HsitpError, KeyError):
    """A dataset name that is not in the registry."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


@dataclass(frozen=True)
class RawFile:
    """One distributed file, identified by its bytes (sha256), not by its name or URL."""

    name: str
    sha256: str
    size: int | None
    variable: str | None  # MATLAB variable holding the array; None for .npy or archives
    url: str | None = None  # official URL; None when no public URL is known
    manual: bool = False  # needs registration: never downloaded automatically
    package: tuple[str, str] | None = None  # (distribution/import name, resource path inside it)
    hash_source: str = GIC_HASH_SOURCE

    @property
    def official_path(self) -> str | None:
        """Path of the file under a mirror that copies the official server's layout (e.g. ``6/67/X.mat``)."""
        if self.url is None:
            return None
        if self.url.startswith(GIC_BASE):
            return self.url[len(GIC_BASE) :]
        return urlparse(self.url).path.lstrip("/")


@dataclass(frozen=True)
class Variant:
    """A complete file set that yields the scene: cube + ground truth (or one archive, gt None)."""

    name: str  # "corrected", "uncorrected" or "package"
    cube: RawFile
    gt: RawFile | None
    uncorrected: bool = False  # True: the cube still has the bands in DatasetSpec.removed_bands

    @property
    def files(self) -> tuple[RawFile, ...]:
        return (self.cube,) if self.gt is None else (self.cube, self.gt)


@dataclass(frozen=True)
class DatasetSpec:
    """Everything the pipeline knows about a scene before touching a file (the prepared file: docs/contracts.md)."""

    name: str
    title: str
    rows: int
    cols: int
    bands: int  # bands of the prepared cube (after bad-band removal)
    raw_bands: int | None  # bands of the uncorrected source, where one is distributed
    classes: Mapping[int, str]  # {label: name}; label 0 = unlabelled is not listed
    class_counts: Mapping[int, int] | None
    sensor: str
    citation: str
    licence: str
    verified: bool  # grid and class counts confirmed against a file (shared README)
    variants: tuple[Variant, ...]
    removed_bands: tuple[int, ...] = ()  # 1-based, in raw_bands numbering; removed from uncorrected cubes
    # 1-based original band number of each prepared band; default: the raw numbers that removed_bands keeps, else
    # 1..bands (the distributed file's own numbering)
    band_numbers: tuple[int, ...] = ()
    band_numbering: str = ""  # what band_numbers mean for this scene
    wavelengths_nm: tuple[float, ...] | None = None  # band centres when known; None = omitted, never invented
    manual: str | None = None  # what the user must download and where to put it (registration needed)
    prepare_unsupported: str | None = None  # why `hsitp data prepare` cannot read this source yet
    unverified: Mapping[str, str] = field(default_factory=dict)  # fact -> where the claim comes from
    notes: str = ""

    def __post_init__(self) -> None:
        if not self.band_numbers:
            removed, raw = self.removed_bands, self.raw_bands
            kept = _kept(raw, removed) if removed and raw else tuple(range(1, self.bands + 1))
            object.__setattr__(self, "band_numbers", kept)

    @property
    def files(self) -> tuple[RawFile, ...]:
        """Every distinct file of every variant, in registry order."""
        seen: dict[str, RawFile] = {}
        for v in self.variants:
            for f in v.files:
                seen.setdefault(f.name, f)
        return tuple(seen.values())

    @property
    def n_classes(self) -> int:
        return len(self.classes)


def _ranges(*spans: tuple[int, int] | int) -> tuple[int, ...]:
    """Expand inclusive 1-based spans, e.g. ((104, 108), 220) -> (104, ..., 108, 220)."""
    out: list[int] = []
    for s in spans:
        out.extend(range(s[0], s[1] + 1) if isinstance(s, tuple) else [s])
    return tuple(out)


def _kept(total: int, removed: Iterable[int]) -> tuple[int, ...]:
    drop = set(removed)
    return tuple(b for b in range(1, total + 1) if b not in drop)


def _gic(path: str, size: int, sha256: str, variable: str) -> RawFile:
    return RawFile(
        name=path.rsplit("/", 1)[1], sha256=sha256, size=size, variable=variable, url=GIC_BASE + path
    )


def _corrected(cube: RawFile, gt: RawFile) -> tuple[Variant, ...]:
    """The variants of a scene distributed only as a corrected cube and its ground truth."""
    return (Variant("corrected", cube, gt),)


def _labels(*values: _T, labels: Iterable[int] | None = None) -> dict[int, _T]:
    """{label: value} for labels 1..n, or for the given labels (Salinas-A uses {1, 10..14})."""
    keys = list(labels) if labels is not None else list(range(1, len(values) + 1))
    return dict(zip(keys, values, strict=True))


GIC_TERMS = (
    "No licence is stated in the sources recorded in the shared README; the GIC page distributes the scene publicly "
    "for research. Cite the original source and the GIC page (terms unverified)."
)
GIC_CITATION = (
    f"M. Graña, M. A. Veganzons, B. Ayerdi, 'Hyperspectral Remote Sensing Scenes', GIC, UPV/EHU, {GIC_PAGE}"
)
LITERATURE = "bibliographic reference from the literature; not recorded in the shared README"
_REPORTED = "commonly reported values (shared README table 'NOT verified against files')"
_GRID_AND_COUNTS = {"grid": _REPORTED, "class_counts": _REPORTED}  # facts no file confirmed
_SENSOR_AND_CITATION = {"sensor": "common knowledge", "citation": LITERATURE}

# --- Indian Pines -----------------------------------------------------------------------------------------------
_IP_REMOVED = _ranges((104, 108), (150, 163), 220)
_IP_GT_MAT = _gic(
    "c/c4/Indian_pines_gt.mat",
    1125,
    "65c4687a8ab04f6da4789799bc3bc4f6e88bccac3ed6a2e6ae367e5e6b9e429c",
    "indian_pines_gt",
)
_TENSORLY_HASHES = "sha256 of the file in the PyPI wheel tensorly-0.10.0-py3-none-any.whl (shared README)"
INDIAN_PINES = DatasetSpec(
    name="indian_pines",
    title="Indian Pines (AVIRIS, Indiana, 1992)",
    rows=145,
    cols=145,
    bands=200,
    raw_bands=220,
    classes=_labels(
        "Alfalfa",
        "Corn-notill",
        "Corn-mintill",
        "Corn",
        "Grass-pasture",
        "Grass-trees",
        "Grass-pasture-mowed",
        "Hay-windrowed",
        "Oats",
        "Soybean-notill",
        "Soybean-mintill",
        "Soybean-clean",
        "Wheat",
        "Woods",
        "Buildings-Grass-Trees-Drives",
        "Stone-Steel-Towers",
    ),
    class_counts=_labels(46, 1428, 830, 237, 483, 730, 28, 478, 20, 972, 2455, 593, 205, 1265, 386, 93),
    sensor="AVIRIS (airborne, NASA/JPL)",
    citation=(
        "M. F. Baumgardner, L. L. Biehl, D. A. Landgrebe, '220 Band AVIRIS Hyperspectral Image Data Set: June 12, "
        "1992 Indian Pine Test Site 3', Purdue University Research Repository, 2015, doi:10.4231/R7RX991C; "
        + GIC_CITATION
    ),
    licence=(
        GIC_TERMS
        + " The offline copy comes from the tensorly 0.10.0 wheel (tensorly is BSD-3-Clause; whether that "
        "covers the data is not stated: unverified)."
    ),
    verified=True,
    variants=(
        Variant(
            "corrected",
            _gic(
                "6/67/Indian_pines_corrected.mat",
                5953527,
                "ec2f8808710919d566f70f0d4aa885aae1ddfd42b734aba71c5e12ca65450939",
                "indian_pines_corrected",
            ),
            _IP_GT_MAT,
        ),
        Variant(
            "uncorrected",
            RawFile(
                name="Indian_pines.mat",
                sha256="fd6498950de76fb68680e335d30dae63f2337be8ba4b3ab8aa8dbb7b36cff273",
                size=6296374,
                variable="indian_pines",
                url=GIC_BASE + "2/22/Indian_pines.mat",
                hash_source="Git LFS pointer in hxlnwpu/Hyperspectral_image_classification only (shared README)",
            ),
            _IP_GT_MAT,
            uncorrected=True,
        ),
        Variant(
            "package",
            RawFile(
                name="Indian_pines_corrected.npy",
                sha256="8f038e4d81569e38ebfc72a15c9984c150de42580ab260be10a13442e912e451",
                size=8410128,
                variable=None,
                package=("tensorly", "datasets/data/Indian_pines_corrected.npy"),
                hash_source=_TENSORLY_HASHES,
            ),
            RawFile(
                name="Indian_pines_gt.npy",
                sha256="44610d21625b311b05b8e0c4ba9a6cc755c2fbb9df48e4d89419024aa6ad3f9d",
                size=21153,
                variable=None,
                package=("tensorly", "datasets/data/Indian_pines_gt.npy"),
                hash_source=_TENSORLY_HASHES,
            ),
        ),
    ),
    removed_bands=_IP_REMOVED,
    band_numbering="1-based AVIRIS band numbers of the 220-band Indian_pines.mat",
    unverified={
        "citation": LITERATURE,
        "sensor": "common knowledge; the shared README calls the bands AVIRIS bands",
    },
    notes="Removed bands 104-108, 150-163, 220 (Gualtieri & Cromp 1999, via kdu/HSR_Tucker; shared README).",
)

# --- Salinas / Salinas-A ----------------------------------------------------------------------------------------
_SA_REMOVED = _ranges((108, 112), (154, 167), 224)
_SALINAS_NAMES = [
    "Brocoli_green_weeds_1",
    "Brocoli_green_weeds_2",
    "Fallow",
    "Fallow_rough_plow",
    "Fallow_smooth",
    "Stubble",
    "Celery",
    "Grapes_untrained",
    "Soil_vinyard_develop",
    "Corn_senesced_green_weeds",
    "Lettuce_romaine_4wk",
    "Lettuce_romaine_5wk",
    "Lettuce_romaine_6wk",
    "Lettuce_romaine_7wk",
    "Vinyard_untrained",
    "Vinyard_vertical_trellis",
]
_SALINAS_BANDS = "1-based AVIRIS band numbers of the 224-band Salinas.mat / SalinasA.mat"
SALINAS = DatasetSpec(
    name="salinas",
    title="Salinas Valley (AVIRIS, California)",
    rows=512,
    cols=217,
    bands=204,
    raw_bands=224,
    classes=_labels(*_SALINAS_NAMES),
    class_counts=_labels(
        2009, 3726, 1976, 1394, 2678, 3959, 3579, 11271, 6203, 3278, 1068, 1927, 916, 1070, 7268, 1807
    ),
    sensor="AVIRIS (airborne, NASA/JPL)",
    citation=GIC_CITATION,
    licence=GIC_TERMS,
    verified=True,
    variants=_corrected(
        _gic(
            "a/a3/Salinas_corrected.mat",
            26552770,
            "5ec1c0d22f56d18ecd336f8e35735863c0f160682e04e0c18ef3f89a3334d87d",
            "salinas_corrected",
        ),
        _gic(
            "f/fa/Salinas_gt.mat",
            4277,
            "ecfab4d31ef5553f097943235d8ea502038eb4a2067b2ad10b33e37c949955e2",
            "salinas_gt",
        ),
    ),
    removed_bands=_SA_REMOVED,
    band_numbering=_SALINAS_BANDS,
    unverified={
        "bands": "204 from the GIC description; the corrected cube was not checked (only Salinas_gt.mat was)",
        "sensor": "common knowledge",
    },
    notes="Salinas.mat (224 bands) is not registered: no published checksum was found for it.",
)

_SA_LABELS = (1, 10, 11, 12, 13, 14)  # Salinas labels of the classes in the sub-scene
_SA_GT_MAT = _gic(
    "a/aa/SalinasA_gt.mat",
    587,
    "17814c1d3296c0e29b27f320f2c4174d2a68adb87e376abe78f02923e2c2e454",
    "salinasA_gt",
)
SALINAS_A = DatasetSpec(
    name="salinas_a",
    title="Salinas-A (AVIRIS, sub-scene of Salinas)",
    rows=83,
    cols=86,
    bands=204,
    raw_bands=224,
    classes=_labels(*(_SALINAS_NAMES[i - 1] for i in _SA_LABELS), labels=_SA_LABELS),
    class_counts={1: 391, 10: 1343, 11: 616, 12: 1525, 13: 674, 14: 799},
    sensor="AVIRIS (airborne, NASA/JPL)",
    citation=GIC_CITATION,
    licence=GIC_TERMS,
    verified=True,
    variants=(
        Variant(
            "corrected",
            _gic(
                "1/1a/SalinasA_corrected.mat",
                1539086,
                "d75684ed3ab71a1024cee0f9db9061f50a3523a92ff5edfbbb1eed976b9f1721",
                "salinasA_corrected",
            ),
            _SA_GT_MAT,
        ),
        Variant(
            "uncorrected",
            RawFile(
                name="SalinasA.mat",
                sha256="9ee47a5fa61948bc5ec5e5754e9ab0976850f12f80ace2bf68449d7671e0935b",
                size=1599885,
                variable="salinasA",
                url=None,
                hash_source=(
                    "sha256 of the copy in the shared README (ShukunZhang/LLPD); no published checksum exists, and "
                    "no official URL was found, so it comes only from the cache or a mirror"
                ),
            ),
            _SA_GT_MAT,
            uncorrected=True,
        ),
    ),
    removed_bands=_SA_REMOVED,
    band_numbering=_SALINAS_BANDS,
    unverified={"sensor": "common knowledge"},
    notes="The array is 83 rows x 86 columns (the GIC page says 86x83). Labels are {1, 10-14} (Salinas labels).",
)

# --- Pavia -----------------------------------------------------------------------------------------------------
_PAVIA_CITATION = "ROSIS data courtesy of P. Gamba, University of Pavia; " + GIC_CITATION
_DISTRIBUTED = (
    "1-based band index in the distributed file (the distributor removed noisy bands; which is not recorded)"
)
PAVIA_UNIVERSITY = DatasetSpec(
    name="pavia_university",
    title="Pavia University (ROSIS, Italy)",
    rows=610,
    cols=340,
    bands=103,
    raw_bands=None,
    classes=_labels(
        "Asphalt",
        "Meadows",
        "Gravel",
        "Trees",
        "Painted metal sheets",
        "Bare Soil",
        "Bitumen",
        "Self-Blocking Bricks",
        "Shadows",
    ),
    class_counts=_labels(6631, 18649, 2099, 3064, 1345, 5029, 1330, 3682, 947),
    sensor="ROSIS (airborne, DLR)",
    citation=_PAVIA_CITATION,
    licence=GIC_TERMS,
    verified=True,
    variants=_corrected(
        _gic(
            "e/ee/PaviaU.mat",
            34806917,
            "28447fa87f7a5797845e9a189c0da85e23b1d06a4ba7361e5ff44efbf834d2fb",
            "paviaU",
        ),
        _gic(
            "5/50/PaviaU_gt.mat",
            11005,
            "23f6a426928f9b32984adffe659e29f554f9fb6c93b5a107528d308d5087a829",
            "paviaU_gt",
        ),
    ),
    band_numbering=_DISTRIBUTED,
    unverified={
        "bands": "103 as commonly reported; the cube was not checked (only PaviaU_gt.mat was)",
        **_SENSOR_AND_CITATION,
    },
)

PAVIA_CENTRE = DatasetSpec(
    name="pavia_centre",
    title="Pavia Centre (ROSIS, Italy)",
    rows=1096,
    cols=715,
    bands=102,
    raw_bands=None,
    classes=_labels(
        "Water",
        "Trees",
        "Asphalt",
        "Self-Blocking Bricks",
        "Bitumen",
        "Tiles",
        "Shadows",
        "Meadows",
        "Bare Soil",
    ),
    class_counts=_labels(65971, 7598, 3090, 2685, 6584, 9248, 7287, 42826, 2863),
    sensor="ROSIS (airborne, DLR)",
    citation=_PAVIA_CITATION,
    licence=GIC_TERMS,
    verified=False,
    variants=_corrected(
        _gic(
            "e/e3/Pavia.mat",
            129624657,
            "b60341da323fd271cd97dd6d7a69514d385ccd7fdfc5a60c4ff5994b047f152e",
            "pavia",
        ),
        _gic(
            "5/53/Pavia_gt.mat",
            34887,
            "7eb54ab81b404dd3ae572e6d0ec211595029e5a847bec2cfb8f9e72d07066b69",
            "pavia_gt",
        ),
    ),
    band_numbering=_DISTRIBUTED,
    unverified={**_GRID_AND_COUNTS, **_SENSOR_AND_CITATION},
)

# --- KSC, Botswana ----------------------------------------------------------------------------------------------
_HAM = (
    "J. Ham, Y. Chen, M. M. Crawford, J. Ghosh, 'Investigation of the random forest framework for classification of "
    "hyperspectral data', IEEE Trans. Geosci. Remote Sens. 43(3):492-501, 2005; " + GIC_CITATION
)
KSC = DatasetSpec(
    name="ksc",
    title="Kennedy Space Center (AVIRIS, Florida)",
    rows=512,
    cols=614,
    bands=176,
    raw_bands=None,
    classes=_labels(
        "Scrub",
        "Willow swamp",
        "Cabbage palm hammock",
        "Cabbage palm/oak hammock",
        "Slash pine",
        "Oak/broadleaf hammock",
        "Hardwood swamp",
        "Graminoid marsh",
        "Spartina marsh",
        "Cattail marsh",
        "Salt marsh",
        "Mud flats",
        "Water",
    ),
    class_counts=_labels(761, 243, 256, 252, 161, 229, 105, 431, 520, 404, 419, 503, 927),
    sensor="AVIRIS (airborne, NASA/JPL)",
    citation=_HAM,
    licence=GIC_TERMS,
    verified=False,
    variants=_corrected(
        _gic(
            "2/26/KSC.mat",
            56824624,
            "b1ad011cfdb65c853e4f9f6108ca4774467d87f90a5c23b74ff3a2984a3b4786",
            "KSC",
        ),
        _gic(
            "a/a6/KSC_gt.mat",
            3240,
            "a1d6ab9293691006bd4d9742d1a1e1c141b1aaa5fbc5fa128b33c1d09038510b",
            "KSC_gt",
        ),
    ),
    band_numbering=(
        "1-based band index in the distributed 176-band file; the original AVIRIS numbers are unknown (the only "
        "published removed-band list removes 44 of 224 bands, leaving 180, so it is not used)"
    ),
    unverified={**_GRID_AND_COUNTS, **_SENSOR_AND_CITATION},
)

_BOTSWANA_KEPT = _ranges((10, 55), (82, 97), (102, 119), (134, 164), (187, 220))
BOTSWANA = DatasetSpec(
    name="botswana",
    title="Botswana, Okavango Delta (Hyperion, EO-1)",
    rows=1476,
    cols=256,
    bands=145,
    raw_bands=None,
    classes=_labels(
        "Water",
        "Hippo grass",
        "Floodplain grasses 1",
        "Floodplain grasses 2",
        "Reeds",
        "Riparian",
        "Firescar",
        "Island interior",
        "Acacia woodlands",
        "Acacia shrublands",
        "Acacia grasslands",
        "Short mopane",
        "Mixed mopane",
        "Exposed soils",
    ),
    class_counts=_labels(270, 101, 251, 215, 269, 269, 259, 203, 314, 248, 305, 181, 268, 95),
    sensor="Hyperion (spaceborne, NASA EO-1)",
    citation=_HAM,
    licence=GIC_TERMS,
    verified=False,
    variants=_corrected(
        _gic(
            "7/72/Botswana.mat",
            78911133,
            "f1603903c844cdc2980550b0180688e8e1a72d4292595d1120e1dec2a80a91c7",
            "Botswana",
        ),
        _gic(
            "5/58/Botswana_gt.mat",
            4039,
            "668394905e10e629c16584bfd02b0f533b96d6ba18a63274a94ff3a77126a887",
            "Botswana_gt",
        ),
    ),
    band_numbers=_BOTSWANA_KEPT,
    band_numbering="1-based Hyperion band numbers (of 242) retained by the distributor, per the GIC description",
    unverified={
        **_GRID_AND_COUNTS,
        "band_numbers": "GIC description (retained 10-55, 82-97, 102-119, 134-164, 187-220); no code source found",
        **_SENSOR_AND_CITATION,
    },
)

# --- Manual-download scenes -------------------------------------------------------------------------------------
HOUSTON_ZIP_URL = "https://machinelearning.ee.uh.edu/2egf4tg8hial13gt/2013_DFTC.zip"
HOUSTON2013 = DatasetSpec(
    name="houston2013",
    title="Houston 2013, IEEE GRSS Data Fusion Contest (CASI, Texas)",
    rows=349,
    cols=1905,
    bands=144,
    raw_bands=None,
    classes=_labels(
        "Healthy grass",
        "Stressed grass",
        "Synthetic grass",
        "Trees",
        "Soil",
        "Water",
        "Residential",
        "Commercial",
        "Road",
        "Highway",
        "Railway",
        "Parking Lot 1",
        "Parking Lot 2",
        "Tennis Court",
        "Running Track",
    ),
    class_counts=None,
    sensor="ITRES CASI-1500 (airborne)",
    citation=(
        "C. Debes et al., 'Hyperspectral and LiDAR data fusion: Outcome of the 2013 GRSS Data Fusion Contest', "
        "IEEE J. Sel. Topics Appl. Earth Observ. Remote Sens. 7(6):2405-2418, 2014"
    ),
    licence=(
        "Registration required (IEEE GRSS Data Fusion Contest 2013, https://machinelearning.ee.uh.edu/?page_id=459); "
        "use under the terms in the archive's copyright.txt and cite Debes et al. 2014 (terms unverified)."
    ),
    verified=False,
    variants=(
        Variant(
            "archive",
            RawFile(
                name="2013_DFTC.zip",
                sha256="f4d619d5cbcb09d0301038f1b8fe83def6c2d484334b7b8127740a00ecf7e245",
                size=None,
                variable=None,
                url=HOUSTON_ZIP_URL,
                manual=True,
                hash_source="songyz2019/rs-fusion-datasets fetch_houston2013.py (stored there as houston2013.zip)",
            ),
            None,
        ),
    ),
    band_numbering="1-based band index of the 144-band CASI cube",
    manual=(
        "Register for the IEEE GRSS Data Fusion Contest 2013 at https://machinelearning.ee.uh.edu/?page_id=459, "
        f"download 2013_DFTC.zip ({HOUSTON_ZIP_URL}) and put it, unchanged, at {{raw_dir}}/houston2013/2013_DFTC.zip "
        "(or <mirror>/houston2013/2013_DFTC.zip); then run `hsitp data fetch houston2013`."
    ),
    prepare_unsupported=(
        "the CASI cube in 2013_DFTC.zip is a 144-band GeoTIFF and hsitp has no GeoTIFF reader dependency "
        "(tifffile or rasterio) yet; the test labels also come as ENVI ROI text files"
    ),
    unverified={
        "grid": _REPORTED,
        "class_counts": "only totals are reported: 15,029 labelled (standard train 2,832 + test 12,197)",
        "sha256": "single source (rs-fusion-datasets)",
        "sensor": "common knowledge; the shared README says CASI",
        "citation": LITERATURE,
    },
)

WHU_HI_LONGKOU = DatasetSpec(
    name="whu_hi_longkou",
    title="WHU-Hi-LongKou (UAV, Hubei, China)",
    rows=550,
    cols=400,
    bands=270,
    raw_bands=None,
    classes=_labels(
        "Corn",
        "Cotton",
        "Sesame",
        "Broad-leaf soybean",
        "Narrow-leaf soybean",
        "Rice",
        "Water",
        "Roads and houses",
        "Mixed weed",
    ),
    class_counts=None,
    sensor="Headwall Nano-Hyperspec on a DJI Matrice 600 Pro UAV",
    citation=(
        "Y. Zhong, X. Hu, C. Luo, X. Wang, J. Zhao, L. Zhang, 'WHU-Hi: UAV-borne hyperspectral with high spatial "
        "resolution (H2) benchmark datasets and classifier for precise crop identification based on deep "
        "convolutional neural network with CRF', Remote Sens. Environ. 250:112012, 2020"
    ),
    licence=(
        "Distributed by the RSIDEA group, Wuhan University (http://rsidea.whu.edu.cn/resource_WHUHi_sharing.htm) "
        "after a request/registration; academic use; cite Zhong et al. 2020 (terms unverified)."
    ),
    verified=False,
    variants=(
        Variant(
            "corrected",
            RawFile(
                name="WHU_Hi_LongKou.mat",
                sha256="4ef90f2222128245b8fc5c9c6003dfc37f43569991190eb32fcc8a3753430634",
                size=None,
                variable="WHU_Hi_LongKou",
                manual=True,
                hash_source="single public DatasetSpec file (shared README); unverified",
            ),
            RawFile(
                name="WHU_Hi_LongKou_gt.mat",
                sha256="b5a3634dc31a907ea6e60192ad7cd2b7946453ec57526ea7724941d8c1078178",
                size=None,
                variable="WHU_Hi_LongKou_gt",
                manual=True,
                hash_source="single public DatasetSpec file (shared README); unverified",
            ),
        ),
    ),
    band_numbering="1-based band index in the distributed 270-band file",
    manual=(
        "Request WHU-Hi-LongKou from http://rsidea.whu.edu.cn/resource_WHUHi_sharing.htm, then put "
        "WHU_Hi_LongKou.mat and WHU_Hi_LongKou_gt.mat, unchanged, in {raw_dir}/whu_hi_longkou/ "
        "(or <mirror>/whu_hi_longkou/); then run `hsitp data fetch whu_hi_longkou`."
    ),
    unverified={
        "grid": _REPORTED,
        "class_counts": "only the total is reported: 204,542 labelled pixels",
        "sha256": "single public source (shared README)",
        **_SENSOR_AND_CITATION,
    },
)

_REGISTRY: dict[str, DatasetSpec] = {
    s.name: s
    for s in (
        INDIAN_PINES,
        SALINAS,
        SALINAS_A,
        PAVIA_UNIVERSITY,
        PAVIA_CENTRE,
        KSC,
        BOTSWANA,
        HOUSTON2013,
        WHU_HI_LONGKOU,
    )
}


def names() -> list[str]:
    """Registry order: indian_pines, salinas, salinas_a, pavia_university, pavia_centre, ksc, botswana, ..."""
    return list(_REGISTRY)


def get(name: str) -> DatasetSpec:
    """The spec of ``name``; an UnknownDatasetError listing the valid names otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownDatasetError(
            f"unknown dataset {name!r}; valid names: {', '.join(names())} (see `hsitp data list`)"
        ) from None


def all_specs() -> list[DatasetSpec]:
    return list(_REGISTRY.values())
