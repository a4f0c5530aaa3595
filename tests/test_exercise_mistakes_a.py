"""Chapters 01-05's exercise checks against the mistakes learners make: each wrong answer gets a ✗ that names
its mistake, and right answers written unlike the worked solutions get a ✓."""

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from course_lib.pytorch_loop import WeightedFocalLoss
from course_lib.exercises import registered, verdict
from PIL import Image
from sklearn.metrics import roc_auc_score
from pytorch_lightning.callbacks import Callback
from torch.utils.data import DataLoader, RandomSampler, Subset, TensorDataset
from torchvision import tv_tensors
from torchvision.transforms import v2

CHAPTERS = ("1", "2", "3", "4", "5")
# 3.4-measured-while-autograd-records turns a tensor that requires grad into a float, as that mistake does
pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True:UserWarning")


# --- 1.1 malignant images per patient ------------------------------------------------------------------


def counts_all_images(df):
    return df.groupby("patient_id").target.count()


def drops_patients_without_melanoma(df):
    return df[df.target == 1].groupby("patient_id").size()


def averages_the_labels(df):
    return df.groupby("patient_id").target.mean()


def returns_a_dict(df):
    return df.groupby("patient_id").target.sum().to_dict()


def malignant_by_crosstab(df):
    table = pd.crosstab(df.patient_id, df.target)
    return table[1] if 1 in table else pd.Series(0, index=table.index)


def malignant_by_value_counts(df):
    counts = df.loc[df.target == 1, "patient_id"].value_counts()
    return counts.reindex(df.patient_id.unique(), fill_value=0)


# --- 1.2 folds grouped by patient ------------------------------------------------------------------------


def folds_by_row(df, n_folds):
    return np.arange(len(df)) % n_folds


def folds_from_one(df, n_folds):
    return pd.factorize(df.patient_id)[0] % n_folds + 1


def five_folds_always(df, n_folds):
    return pd.factorize(df.patient_id)[0] % 5


def one_fold_per_patient(df, n_folds):
    return np.arange(df.patient_id.nunique()) % n_folds


def folds_as_floats(df, n_folds):
    patient_number, patients = pd.factorize(df.patient_id)
    return np.floor(patient_number * n_folds / len(patients))


def group_k_fold(df, n_folds):
    from sklearn.model_selection import GroupKFold

    folds = np.zeros(len(df), dtype=int)
    for k, (_, valid) in enumerate(GroupKFold(n_splits=n_folds).split(df, groups=df.patient_id)):
        folds[valid] = k
    return folds


def sorted_patients_dealt(df, n_folds):
    fold_of = {p: k % n_folds for k, p in enumerate(sorted(df.patient_id.unique()))}
    return df.patient_id.map(fold_of)


# --- 1.3 folds stratified by target ----------------------------------------------------------------------


def grouped_not_stratified(df, n_folds):
    return pd.factorize(df.patient_id)[0] % n_folds


def stratified_by_row(df, n_folds):
    from sklearn.model_selection import StratifiedKFold

    folds = np.zeros(len(df), dtype=int)
    for k, (_, valid) in enumerate(StratifiedKFold(n_folds).split(df, df.target)):
        folds[valid] = k
    return folds


def sorted_deck_cut_in_blocks(df, n_folds):
    deck = df.groupby("patient_id").target.sum().sort_values(ascending=False, kind="stable")
    blocks = np.array_split(np.arange(len(deck)), n_folds)
    fold_of = {deck.index[i]: k for k, block in enumerate(blocks) for i in block}
    return df.patient_id.map(fold_of).to_numpy()


def dealt_three_to_fold_zero(df, n_folds):
    deck = df.groupby("patient_id").target.sum().sort_values(ascending=False, kind="stable")
    pattern = [0, 0, 0] + list(range(1, n_folds))
    fold_of = {p: pattern[k % len(pattern)] for k, p in enumerate(deck.index)}
    return df.patient_id.map(fold_of).to_numpy()


def stratified_group_k_fold(df, n_folds):
    from sklearn.model_selection import StratifiedGroupKFold

    folds = np.zeros(len(df), dtype=int)
    # shuffle=False: its shuffle broke the stratification before scikit-learn 1.8 (scikit-learn#32540)
    splits = StratifiedGroupKFold(n_folds).split(df, df.target, df.patient_id)
    for k, (_, valid) in enumerate(splits):
        folds[valid] = k
    return folds


def greedy_on_positives_only(df, n_folds):
    per_patient = df.groupby("patient_id").target.agg(["sum", "size"]).sort_values("sum", ascending=False)
    positives, fold_of = [0] * n_folds, {}
    for patient, (pos, _) in per_patient.iterrows():
        k = positives.index(min(positives))
        fold_of[patient], positives[k] = k, positives[k] + pos
    return df.patient_id.map(fold_of).to_numpy()


def greedy_positives_then_images(df, n_folds):
    per_patient = df.groupby("patient_id").target.agg(["sum", "size"])
    per_patient = per_patient.sort_values(["sum", "size"], ascending=False, kind="stable")
    positives, images, fold_of = [0] * n_folds, [0] * n_folds, {}
    for patient, (pos, size) in per_patient.iterrows():
        load = positives if pos else images
        k = min(range(n_folds), key=lambda f: (load[f], images[f]))
        fold_of[patient], positives[k], images[k] = k, positives[k] + pos, images[k] + size
    return np.array([fold_of[p] for p in df.patient_id])


# --- 2.1 a transform of your own --------------------------------------------------------------------------


def _circle(inpt, diameter):
    "The boolean mask of a centred circle of `diameter` times the shorter side, for inpt's height and width."
    h, w = inpt.shape[-2:]
    y, x = torch.meshgrid(torch.arange(h) - (h - 1) / 2, torch.arange(w) - (w - 1) / 2, indexing="ij")
    return x**2 + y**2 <= (diameter * min(h, w) / 2) ** 2


class _MicroscopeBase(v2.Transform):
    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def make_params(self, flat_inputs):
        return {"apply": bool(torch.rand(()) < self.p), "diameter": 0.8 + 0.2 * float(torch.rand(()))}


class MicroscopeDrawsPerInput(_MicroscopeBase):
    def make_params(self, flat_inputs):
        return {}

    def transform(self, inpt, params):
        if torch.rand(()) >= self.p:
            return inpt
        return tv_tensors.wrap(inpt * _circle(inpt, 0.8 + 0.2 * float(torch.rand(()))), like=inpt)


class MicroscopeAlways(_MicroscopeBase):
    def transform(self, inpt, params):
        return tv_tensors.wrap(inpt * _circle(inpt, params["diameter"]), like=inpt)


class MicroscopeUnwrapped(_MicroscopeBase):
    def transform(self, inpt, params):
        return inpt * _circle(inpt, params["diameter"]) if params["apply"] else inpt


class MicroscopeInverted(_MicroscopeBase):
    def transform(self, inpt, params):
        return (
            tv_tensors.wrap(inpt * ~_circle(inpt, params["diameter"]), like=inpt) if params["apply"] else inpt
        )


class MicroscopeFixedSize(_MicroscopeBase):
    def transform(self, inpt, params):
        return tv_tensors.wrap(inpt * _circle(inpt, 0.9), like=inpt) if params["apply"] else inpt


class MicroscopeFloatMask(_MicroscopeBase):
    def transform(self, inpt, params):
        mask = _circle(inpt, params["diameter"]).float()
        return tv_tensors.wrap(inpt * mask, like=inpt) if params["apply"] else inpt


class MicroscopeModule(torch.nn.Module):
    "A plain module: no v2 machinery, so a label would be darkened too."

    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def forward(self, image):
        return image * _circle(image, 0.9)


class MicroscopeWhere(v2.Transform):
    "Python's random for the draws, torch.where for the pixels, the radius in pixels."

    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def make_params(self, flat_inputs):
        import random

        h, w = v2.query_size(flat_inputs)
        return {"apply": random.random() < self.p, "radius": random.uniform(0.4, 0.5) * min(h, w)}

    def transform(self, inpt, params):
        if not params["apply"]:
            return inpt
        h, w = inpt.shape[-2:]
        ys = (torch.arange(h, dtype=torch.float32) - (h - 1) / 2)[:, None]
        xs = (torch.arange(w, dtype=torch.float32) - (w - 1) / 2)[None, :]
        out = torch.where(ys**2 + xs**2 <= params["radius"] ** 2, inpt, torch.zeros_like(inpt))
        return tv_tensors.Image(out)


# --- 2.2 an epoch's order from the seed and the epoch ----------------------------------------------------


def seeded_by_the_sum(n, seed, epoch):
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).tolist()


def seeded_by_the_difference(n, seed, epoch):
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed - epoch)).tolist()


def ignores_the_epoch(n, seed, epoch):
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()


def ignores_the_seed(n, seed, epoch):
    return torch.randperm(n, generator=torch.Generator().manual_seed(epoch)).tolist()


def global_generator(n, seed, epoch):
    return torch.randperm(n).tolist()


def not_shuffled(n, seed, epoch):
    return list(range(n))


def from_one_to_n(n, seed, epoch):
    g = torch.Generator().manual_seed(seed * 100_003 + epoch)
    return (torch.randperm(n, generator=g) + 1).tolist()


def numpy_seed_sequence(n, seed, epoch):
    return np.random.default_rng([seed, epoch]).permutation(n).tolist()


def python_random_string_seed(n, seed, epoch):
    import random

    order = list(range(n))
    random.Random(f"{seed}/{epoch}").shuffle(order)
    return order


# --- 2.3 find the images that are not RGB ----------------------------------------------------------------


def _mode(path):
    with Image.open(path) as im:
        return im.mode


def only_grayscale(paths):
    return [p for p in paths if _mode(p) == "L"]


def inverted_condition(paths):
    return [p for p in paths if _mode(p) == "RGB"]


def converted_first(paths):
    return [p for p in paths if Image.open(p).convert("RGB").mode != "RGB"]


def by_array_dimensions(paths):
    return [p for p in paths if np.asarray(Image.open(p)).ndim != 3]


def by_array_shape(paths):
    return [p for p in paths if (a := np.asarray(Image.open(p))).ndim != 3 or a.shape[2] != 3]


def not_rgb_with_filter(paths):
    return list(filter(lambda p: _mode(p) not in ("RGB",), paths))


# --- 2.4 a Dataset's __getitem__ ------------------------------------------------------------------------


class _Items(torch.utils.data.Dataset):
    "The stub's __init__ and __len__; each mistake below writes __getitem__."

    def __init__(self, image_paths, targets, augmentations=None):
        self.image_paths, self.targets = list(image_paths), list(targets)
        self.augmentations = augmentations

    def __len__(self):
        return len(self.image_paths)


class KeepsTheFileMode(_Items):
    def __getitem__(self, idx):
        image = np.array(Image.open(self.image_paths[idx]))  # the post's line: 1 or 4 channels stay
        if self.augmentations is not None:
            image = self.augmentations(image)
        return image, torch.tensor([self.targets[idx]], dtype=torch.float32)


class IntegerTarget(_Items):
    def __getitem__(self, idx):
        image = np.array(Image.open(self.image_paths[idx]).convert("RGB"))
        if self.augmentations is not None:
            image = self.augmentations(image)
        return image, torch.tensor([self.targets[idx]])


class ScalarTarget(_Items):
    def __getitem__(self, idx):
        image = np.array(Image.open(self.image_paths[idx]).convert("RGB"))
        if self.augmentations is not None:
            image = self.augmentations(image)
        return image, torch.tensor(self.targets[idx], dtype=torch.float32)


class AugmentsBeforeConverting(_Items):
    def __getitem__(self, idx):
        image = Image.open(self.image_paths[idx])
        if self.augmentations is not None:
            return self.augmentations(np.array(image)), torch.tensor([float(self.targets[idx])])
        return np.array(image.convert("RGB")), torch.tensor([float(self.targets[idx])])


class NoAugmentations(_Items):
    def __getitem__(self, idx):
        image = np.array(Image.open(self.image_paths[idx]).convert("RGB"))
        return image, torch.tensor([self.targets[idx]], dtype=torch.float32)


class ImageOnly(_Items):
    def __getitem__(self, idx):
        return np.array(Image.open(self.image_paths[idx]).convert("RGB"))


class ThroughTheCoursesHelpers(_Items):
    def __getitem__(self, idx):
        from course_lib.dataset import load_image
        from course_lib.dataset import augment

        image = load_image(self.image_paths[idx])
        if self.augmentations is not None:
            image = augment(self.augmentations, image)
        return image, torch.as_tensor(self.targets[idx], dtype=torch.float32).reshape(1)


# --- 3.1 the weighted focal loss -------------------------------------------------------------------------


def focal_2020(logits, targets, alpha=0.25, gamma=2.0):
    bce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    at = torch.tensor([alpha, 1 - alpha]).gather(0, targets.long().view(-1))
    return (at * (1 - torch.exp(-bce)) ** gamma * bce).mean()


def focal_alpha_swapped(logits, targets, alpha=0.25, gamma=2.0):
    bce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    alpha_t = torch.where(targets == 1, alpha, 1 - alpha)
    return (alpha_t * (1 - torch.exp(-bce)) ** gamma * bce).mean()


def focal_summed(logits, targets, alpha=0.25, gamma=2.0):
    bce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    alpha_t = torch.where(targets == 1, 1 - alpha, alpha)
    return (alpha_t * (1 - torch.exp(-bce)) ** gamma * bce).sum()


def focal_without_gamma(logits, targets, alpha=0.25, gamma=2.0):
    bce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    return (torch.where(targets == 1, 1 - alpha, alpha) * bce).mean()


def focal_constant_alpha(logits, targets, alpha=0.25, gamma=2.0):
    bce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    alpha_t = torch.where(targets == 1, 0.75, 0.25)
    return (alpha_t * (1 - torch.exp(-bce)) ** gamma * bce).mean()


def focal_p_of_positive(logits, targets, alpha=0.25, gamma=2.0):
    bce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    alpha_t = torch.where(targets == 1, 1 - alpha, alpha)
    return (alpha_t * (1 - torch.sigmoid(logits)) ** gamma * bce).mean()


def focal_from_log_sigmoid(logits, targets, alpha=0.25, gamma=2.0):
    log_p_t = F.logsigmoid(torch.where(targets == 1, logits, -logits))
    alpha_t = alpha + (1 - 2 * alpha) * targets
    return -(alpha_t * (1 - log_p_t.exp()) ** gamma * log_p_t).sum() / logits.numel()


def focal_by_torchvision(logits, targets, alpha=0.25, gamma=2.0):
    from torchvision.ops import sigmoid_focal_loss

    return sigmoid_focal_loss(logits, targets, alpha=1 - alpha, gamma=gamma, reduction="mean")


# --- 3.2 the fold's AUC, not the batches' --------------------------------------------------------------


def _predictions(model, loader, eval_mode=True, record=False):
    "The loader's logits and targets, each joined into one flat array."
    if eval_mode:
        model.eval()
    logits, targets = [], []
    with torch.set_grad_enabled(record):
        for x, y in loader:
            logits.append(model(x).detach())
            targets.append(y)
    return torch.cat(targets).ravel().numpy(), torch.cat(logits).ravel().numpy()


def auc_mean_of_batches(model, loader):
    model.eval()
    with torch.no_grad():
        aucs = [roc_auc_score(y.ravel(), model(x).ravel()) for x, y in loader]
    return float(np.mean(aucs))


def auc_in_training_mode(model, loader):
    return float(roc_auc_score(*_predictions(model, loader, eval_mode=False)))


def auc_with_autograd(model, loader):
    return float(roc_auc_score(*_predictions(model, loader, record=True)))


def auc_of_decisions(model, loader):
    targets, logits = _predictions(model, loader)
    return float(roc_auc_score(targets, logits > 0))


def auc_as_tensor(model, loader):
    from torchmetrics.functional.classification import binary_auroc

    targets, logits = _predictions(model, loader)
    return binary_auroc(torch.from_numpy(logits), torch.from_numpy(targets).long())


def auc_of_first_batch(model, loader):
    model.eval()
    with torch.no_grad():
        x, y = next(iter(loader))
        return float(roc_auc_score(y.ravel(), model(x).ravel()))


def auc_by_torchmetrics_of_probabilities(model, loader):
    from torchmetrics.classification import BinaryAUROC

    metric = BinaryAUROC()
    model.eval()
    with torch.inference_mode():
        for x, y in loader:
            metric.update(torch.sigmoid(model(x)).ravel(), y.ravel().long())
    return metric.compute().item()


# --- 3.3 early stopping's patience -----------------------------------------------------------------------


def _stopping(aucs, patience, better=lambda auc, best: auc > best, reset=True, limit=lambda n, p: n >= p):
    best, since_best = -1.0, 0
    for epoch, auc in enumerate(aucs):
        if better(auc, best):
            best = auc
            since_best = 0 if reset else since_best
        else:
            since_best += 1
        if limit(since_best, patience):
            return epoch + 1
    return len(aucs)


def equal_auc_improves(aucs, patience):
    return _stopping(aucs, patience, better=lambda auc, best: auc >= best)


def stops_one_epoch_late(aucs, patience):
    return _stopping(aucs, patience, limit=lambda n, p: n > p)


def count_never_resets(aucs, patience):
    return _stopping(aucs, patience, reset=False)


def compares_with_last_epoch(aucs, patience):
    since, previous = 0, -1.0
    for epoch, auc in enumerate(aucs):
        since = 0 if auc > previous else since + 1
        previous = auc
        if since >= patience:
            return epoch + 1
    return len(aucs)


def returns_the_epoch_index(aucs, patience):
    best, since = -1.0, 0
    for epoch, auc in enumerate(aucs):
        best, since = (auc, 0) if auc > best else (best, since + 1)
        if since >= patience:
            return epoch
    return len(aucs)


def epochs_since_best_epoch(aucs, patience):
    best, best_epoch = -math.inf, -1
    for epoch, auc in enumerate(aucs):
        if auc > best:
            best, best_epoch = auc, epoch
        if epoch - best_epoch == patience:
            return epoch + 1
    return len(aucs)


# --- 3.4 the mean loss per image over uneven batches ----------------------------------------------------


def mean_of_batch_means(model, loader, loss_fn):
    with torch.no_grad():
        return sum(loss_fn(model(x), y).item() for x, y in loader) / len(loader)


def sum_of_batch_means(model, loader, loss_fn):
    with torch.no_grad():
        return sum(loss_fn(model(x), y).item() for x, y in loader)


def divided_by_full_batches(model, loader, loss_fn):
    with torch.no_grad():
        total = sum(loss_fn(model(x), y).item() * len(x) for x, y in loader)
    return total / (len(loader) * loader.batch_size)


def backward_while_measuring(model, loader, loss_fn):
    total, seen = 0.0, 0
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        total, seen = total + loss.item() * len(x), seen + len(x)
    return total / seen


def measured_while_recording(model, loader, loss_fn):
    total, seen = 0.0, 0
    for x, y in loader:
        total = total + loss_fn(model(x), y) * len(x)
        seen += len(x)
    return float(total / seen)


def loss_of_all_predictions(model, loader, loss_fn):
    with torch.inference_mode():
        pairs = [(model(x), y) for x, y in loader]
        return float(loss_fn(torch.cat([p for p, _ in pairs]), torch.cat([y for _, y in pairs])))


def running_mean(model, loader, loss_fn):
    mean, seen = 0.0, 0
    with torch.no_grad():
        for x, y in loader:
            seen += len(x)
            mean += (loss_fn(model(x), y).item() - mean) * len(x) / seen
    return mean


# --- 3.5 the training loop ----------------------------------------------------------------------------------


def never_zeroes_the_gradients(model, loader, loss_fn, optimizer):
    model.train()
    total, seen = 0.0, 0
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total, seen = total + loss.item() * len(x), seen + len(x)
    return total / seen


def stays_in_eval_mode(model, loader, loss_fn, optimizer):
    total, seen = 0.0, 0
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        total, seen = total + loss.item() * len(x), seen + len(x)
    return total / seen


def mean_of_the_batch_means(model, loader, loss_fn, optimizer):
    model.train()
    losses = []
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return sum(losses) / len(losses)


def one_step_for_the_epoch(model, loader, loss_fn, optimizer):
    model.train()
    total, seen = 0.0, 0
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        total, seen = total + loss.item() * len(x), seen + len(x)
    optimizer.step()
    optimizer.zero_grad()
    return total / seen


def zeroes_first_and_sums_tensors(model, loader, loss_fn, optimizer):
    model.train()
    total, seen = torch.zeros(()), 0
    for x, y in loader:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.detach() * x.shape[0]
        seen += x.shape[0]
    return (total / seen).item()


# --- 4.1 a LightningModule for any network ---------------------------------------------------------------


class LitBase(pl.LightningModule):
    def __init__(self, net, lr=1e-3):
        super().__init__()
        self.net, self.lr, self.loss_fn = net, lr, WeightedFocalLoss()

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = self.loss_fn(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, batch_size=len(x))
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


class LitPlainBce(LitBase):
    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.binary_cross_entropy_with_logits(self(x), y)
        self.log("train_loss", loss, on_epoch=True, batch_size=len(x))
        return loss


class LitCallsBackward(LitBase):
    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        loss.backward()
        return loss


class LitReturnsItem(LitBase):
    def training_step(self, batch, batch_idx):
        return super().training_step(batch, batch_idx).item()


class LitLogsPerStep(LitBase):
    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = self.loss_fn(self(x), y)
        self.log("train_loss", loss)
        return loss


class LitLogsWithoutBatchSize(LitBase):
    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = self.loss_fn(self(x), y)
        self.log("train_loss", loss, on_epoch=True)
        return loss


class LitFixedLr(LitBase):
    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


class LitLrTypedIn(LitBase):
    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.01)


class LitLogsBceReturnsFocal(LitBase):
    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        bce = F.binary_cross_entropy_with_logits(logits, y)
        self.log("train_loss", bce, on_step=False, on_epoch=True, batch_size=len(x))
        return self.loss_fn(logits, y)


class LitSgd(LitBase):
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


class LitOtherwise(LitBase):
    def training_step(self, batch, batch_idx):
        logits = self.net(batch[0])
        loss = self.loss_fn(logits, batch[1])
        self.log("train_loss", loss, prog_bar=True, on_step=True, on_epoch=True, batch_size=batch[0].shape[0])
        return loss

    def configure_optimizers(self):
        return {"optimizer": torch.optim.Adam(self.net.parameters(), self.lr)}


# --- 4.2 a DataModule's two loaders ----------------------------------------------------------------------


class FoldBase(pl.LightningDataModule):
    def __init__(self, x, y, folds, fold=0, batch_size=32):
        super().__init__()
        self.x, self.y, self.folds, self.fold, self.batch_size = x, y, folds, fold, batch_size

    def setup(self, stage=None):
        valid = self.folds == self.fold
        self.train_set = TensorDataset(self.x[~valid], self.y[~valid])
        self.valid_set = TensorDataset(self.x[valid], self.y[valid])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.valid_set, batch_size=self.batch_size)


class FoldShufflesValidation(FoldBase):
    def val_dataloader(self):
        return DataLoader(self.valid_set, batch_size=self.batch_size, shuffle=True)


class FoldNeverShuffles(FoldBase):
    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size)


class FoldTrainsOnTheFold(FoldBase):
    def setup(self, stage=None):
        valid = self.folds != self.fold
        self.train_set = TensorDataset(self.x[~valid], self.y[~valid])
        self.valid_set = TensorDataset(self.x[valid], self.y[valid])


class FoldAlwaysZero(FoldBase):
    def setup(self, stage=None):
        valid = self.folds == 0
        self.train_set = TensorDataset(self.x[~valid], self.y[~valid])
        self.valid_set = TensorDataset(self.x[valid], self.y[valid])


class FoldTrainsOnEverything(FoldBase):
    def setup(self, stage=None):
        valid = self.folds == self.fold
        self.train_set = TensorDataset(self.x, self.y)
        self.valid_set = TensorDataset(self.x[valid], self.y[valid])


class FoldDefaultBatchSize(FoldBase):
    def train_dataloader(self):
        return DataLoader(self.train_set, shuffle=True)


class FoldDropsLast(FoldBase):
    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True, drop_last=True)


class FoldShuffledOnceInSetup(FoldBase):
    def setup(self, stage=None):
        super().setup(stage)
        order = torch.randperm(len(self.train_set), generator=torch.Generator().manual_seed(0))
        self.train_set = TensorDataset(*self.train_set[order])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=False)


class FoldBatchesOfFour(FoldBase):
    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=4, shuffle=True)


class FoldBySubsets(pl.LightningDataModule):
    def __init__(self, x, y, folds, fold=0, batch_size=32):
        super().__init__()
        self.table = TensorDataset(x, y)
        self.folds, self.fold, self.batch_size = folds, fold, batch_size

    def setup(self, stage=None):
        rows = range(len(self.folds))
        self.train_rows = [i for i in rows if self.folds[i] != self.fold]
        self.valid_rows = [i for i in rows if self.folds[i] == self.fold]

    def train_dataloader(self):
        train = Subset(self.table, self.train_rows)
        return DataLoader(train, batch_size=self.batch_size, sampler=RandomSampler(train))

    def val_dataloader(self):
        return DataLoader(Subset(self.table, self.valid_rows), batch_size=self.batch_size, shuffle=False)


# --- 4.3 a callback that records every epoch -------------------------------------------------------------


class RecorderBase(Callback):
    def __init__(self):
        self.rows = []

    def on_train_epoch_end(self, trainer, module):
        metrics = trainer.callback_metrics
        row = dict(epoch=trainer.current_epoch, train_loss=float(metrics["train_loss"]))
        row["valid_auc"] = float(metrics.get("valid_auc", math.nan))
        self.rows.append(row)


class RecorderKeepsTensors(RecorderBase):
    def on_train_epoch_end(self, trainer, module):
        metrics = trainer.callback_metrics
        row = dict(epoch=trainer.current_epoch, train_loss=metrics["train_loss"])
        self.rows.append({**row, "valid_auc": metrics.get("valid_auc", math.nan)})


class RecorderExpectsValidation(RecorderBase):
    def on_train_epoch_end(self, trainer, module):
        metrics = trainer.callback_metrics
        row = dict(epoch=trainer.current_epoch, train_loss=float(metrics["train_loss"]))
        self.rows.append({**row, "valid_auc": float(metrics["valid_auc"])})


class RecorderReadsLastStep(RecorderBase):
    def on_train_epoch_end(self, trainer, module):
        metrics = trainer.callback_metrics
        row = dict(epoch=trainer.current_epoch, train_loss=float(metrics.get("train_loss_step", math.nan)))
        self.rows.append({**row, "valid_auc": float(metrics.get("valid_auc", math.nan))})


class RecorderKeepsEverything(RecorderBase):
    def on_train_epoch_end(self, trainer, module):
        row = {name: float(value) for name, value in trainer.callback_metrics.items()}
        self.rows.append({"epoch": trainer.current_epoch, **row})


class RecorderZeroWithoutValidation(RecorderBase):
    def on_train_epoch_end(self, trainer, module):
        metrics = trainer.callback_metrics
        row = dict(epoch=trainer.current_epoch, train_loss=float(metrics["train_loss"]))
        self.rows.append({**row, "valid_auc": float(metrics.get("valid_auc", 0.0))})


class RecorderCountsItsRows(RecorderBase):
    def on_train_epoch_end(self, trainer, module):
        metrics = trainer.callback_metrics
        row = dict(epoch=len(self.rows), train_loss=float(metrics["train_loss"]))
        self.rows.append({**row, "valid_auc": float(metrics.get("valid_auc", math.nan))})


class RecorderOnValidationEnd(RecorderBase):
    on_validation_epoch_end = RecorderBase.on_train_epoch_end

    def on_train_epoch_end(self, trainer, module):
        pass


class RecorderNotACallback:
    def __init__(self):
        self.rows = []

    on_train_epoch_end = RecorderBase.on_train_epoch_end


class RecorderWithItem(Callback):
    def __init__(self):
        super().__init__()
        self.rows = []

    def on_train_epoch_end(self, trainer, module):
        metrics = trainer.callback_metrics
        auc = metrics["valid_auc"].item() if "valid_auc" in metrics else float("nan")
        self.rows.append({"train_loss": metrics["train_loss"].item(), "valid_auc": auc})
        self.rows[-1]["epoch"] = int(trainer.current_epoch)


# --- 5.1 the smallest number a format holds --------------------------------------------------------------


def smallest_normal(dtype):
    return torch.finfo(dtype).tiny


def machine_epsilon(dtype):
    return torch.finfo(dtype).eps


def halved_in_python_floats(dtype):
    x = 1.0
    while x / 2 > 0:
        x /= 2
    return x


def halved_once_too_often(dtype):
    x = torch.tensor(1.0, dtype=dtype)
    while x > 0:
        x = x / 2
    return x.item()


def fp16_for_every_format(dtype):
    x = torch.tensor(1.0, dtype=torch.float16)
    while x / 2 > 0:
        x = x / 2
    return x.item()


def table_typed_in(dtype):
    return {torch.float16: 2.0**-24, torch.bfloat16: 2.0**-133, torch.float32: 2.0**-149}[dtype]


def next_after_zero(dtype):
    zero = torch.zeros((), dtype=dtype)
    return torch.nextafter(zero, torch.ones((), dtype=dtype)).item()


def lowest_bit_set(dtype):
    same_size_int = {2: torch.int16, 4: torch.int32, 8: torch.int64}[torch.finfo(dtype).bits // 8]
    return torch.ones(1, dtype=same_size_int).view(dtype).item()


# --- 5.2 the loss scale backs off and grows --------------------------------------------------------------


def grows_one_step_late(scale, found_inf, clean_steps, growth_interval=2000):
    if found_inf:
        return scale / 2, 0
    if clean_steps == growth_interval:
        return scale * 2, 0
    return scale, clean_steps + 1


def inf_keeps_the_count(scale, found_inf, clean_steps, growth_interval=2000):
    if found_inf:
        return scale / 2, clean_steps
    if clean_steps + 1 == growth_interval:
        return scale * 2, 0
    return scale, clean_steps + 1


def growth_keeps_the_count(scale, found_inf, clean_steps, growth_interval=2000):
    if found_inf:
        return scale / 2, 0
    if clean_steps + 1 == growth_interval:
        return scale * 2, clean_steps + 1
    return scale, clean_steps + 1


def interval_of_2000_always(scale, found_inf, clean_steps, growth_interval=2000):
    if found_inf:
        return scale / 2, 0
    if clean_steps + 1 == 2000:
        return scale * 2, 0
    return scale, clean_steps + 1


def grows_every_clean_step(scale, found_inf, clean_steps, growth_interval=2000):
    return (scale / 2, 0) if found_inf else (scale * 2, clean_steps + 1)


def scale_by_modulo(scale, found_inf, clean_steps, growth_interval=2000):
    clean = 0 if found_inf else clean_steps + 1
    factor = 0.5 if found_inf else 2.0 if clean % growth_interval == 0 else 1.0
    return scale * factor, clean % growth_interval


def scale_by_gradscaler_kernel(scale, found_inf, clean_steps, growth_interval=2000):
    s, tracker = torch.tensor([float(scale)]), torch.tensor([clean_steps], dtype=torch.int32)
    torch._amp_update_scale_(s, tracker, torch.tensor([float(found_inf)]), 2.0, 0.5, growth_interval)
    return s.item(), int(tracker.item())


# --- 5.3 one mixed-precision training step ---------------------------------------------------------------


def step_without_autocast(model, x, y, loss_fn, optimizer, scaler, dtype=torch.bfloat16):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def _amp_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        logits = model(x)
    loss = loss_fn(logits.float(), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def step_in_fp16_always(model, x, y, loss_fn, optimizer, scaler, dtype=torch.bfloat16):
    return _amp_step(model, x, y, loss_fn, optimizer, scaler, x.device.type, torch.float16)


def step_in_bf16_always(model, x, y, loss_fn, optimizer, scaler, dtype=torch.bfloat16):
    return _amp_step(model, x, y, loss_fn, optimizer, scaler, x.device.type, torch.bfloat16)


def step_ignores_the_scaler(model, x, y, loss_fn, optimizer, scaler, dtype=torch.bfloat16):
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=dtype):
        loss = loss_fn(model(x).float(), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def step_around_the_scaler(model, x, y, loss_fn, optimizer, scaler, dtype=torch.bfloat16):
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=dtype):
        loss = loss_fn(model(x).float(), y)
    scaler.scale(loss).backward()
    optimizer.step()
    scaler.update()
    return loss.item()


def step_never_zeroes(model, x, y, loss_fn, optimizer, scaler, dtype=torch.bfloat16):
    with torch.autocast(x.device.type, dtype=dtype):
        loss = loss_fn(model(x).float(), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def step_never_updates(model, x, y, loss_fn, optimizer, scaler, dtype=torch.bfloat16):
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=dtype):
        loss = loss_fn(model(x).float(), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    return loss.item()


def step_scaled_twice(model, x, y, loss_fn, optimizer, scaler, dtype=torch.bfloat16):
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=dtype):
        loss = loss_fn(model(x).float(), y)
    scaler.scale(scaler.scale(loss)).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def step_zeroes_at_the_end(model, x, y, loss_fn, optimizer, scaler, dtype=torch.bfloat16):
    with torch.autocast(device_type=str(x.device).split(":")[0], dtype=dtype):
        out = model(x)
    loss = loss_fn(out.to(torch.float32), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.detach())


# --- 5.4 clip the gradients of a scaled step -------------------------------------------------------------


def _scaled_backward(model, x, y, loss_fn, optimizer, scaler, dtype):
    with torch.autocast(x.device.type, dtype=dtype):
        out = model(x)
    optimizer.zero_grad()
    scaler.scale(loss_fn(out.float(), y)).backward()


def clip_before_unscaling(model, x, y, loss_fn, optimizer, scaler, max_norm, dtype=torch.bfloat16):
    _scaled_backward(model, x, y, loss_fn, optimizer, scaler, dtype)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return norm.item()


def unscale_after_clipping(model, x, y, loss_fn, optimizer, scaler, max_norm, dtype=torch.bfloat16):
    _scaled_backward(model, x, y, loss_fn, optimizer, scaler, dtype)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.unscale_(optimizer)
    norm = torch.norm(torch.stack([p.grad.norm() for p in model.parameters()]))
    scaler.step(optimizer)
    scaler.update()
    return norm.item()


def never_clips(model, x, y, loss_fn, optimizer, scaler, max_norm, dtype=torch.bfloat16):
    _scaled_backward(model, x, y, loss_fn, optimizer, scaler, dtype)
    scaler.unscale_(optimizer)
    norm = torch.norm(torch.stack([p.grad.norm() for p in model.parameters()]))
    scaler.step(optimizer)
    scaler.update()
    return norm.item()


def returns_the_clipped_norm(model, x, y, loss_fn, optimizer, scaler, max_norm, dtype=torch.bfloat16):
    _scaled_backward(model, x, y, loss_fn, optimizer, scaler, dtype)
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return torch.norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()


def clipped_step_never_updates(model, x, y, loss_fn, optimizer, scaler, max_norm, dtype=torch.bfloat16):
    _scaled_backward(model, x, y, loss_fn, optimizer, scaler, dtype)
    scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    return norm.item()


def clips_by_hand(model, x, y, loss_fn, optimizer, scaler, max_norm, dtype=torch.bfloat16):
    "Right: the norm and the scaling written out, the gradients zeroed after the step."
    with torch.autocast(x.device.type, dtype=dtype):
        loss = loss_fn(model(x).float(), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    grads = [p.grad for p in model.parameters()]
    norm = torch.sqrt(sum((g.float() ** 2).sum() for g in grads))
    for g in grads:
        g.mul_(min(1.0, max_norm / (norm.item() + 1e-6)))
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
    return norm


# --- the cases ----------------------------------------------------------------------------------------------


def _case(name, answer, message):
    "A wrong answer to the exercise that `name` starts with, and the message its check gives."
    return pytest.param(name.split("-")[0], answer, message, id=name)


def _right(name, answer):
    "A right answer to the exercise that `name` starts with."
    return pytest.param(name.split("-")[0], answer, id=name)


WRONG = [
    _case(
        "1.1-counted-every-image",
        counts_all_images,
        "IP_A has 3 images, 1 of them malignant, but its count is 3: count the malignant images only",
    ),
    _case(
        "1.1-filtered-before-grouping",
        drops_patients_without_melanoma,
        "patient IP_B is missing: every patient needs a count, 0 when none of its images is malignant",
    ),
    _case(
        "1.1-averaged-not-summed",
        averages_the_labels,
        "IP_A has 3 images, 1 of them malignant, but its count is 0.3333333333333333",
    ),
    _case(
        "1.1-dict-not-series",
        returns_a_dict,
        "malignant_per_patient returned a dict: return a pandas Series indexed by patient_id",
    ),
    _case(
        "1.2-fold-per-row",
        folds_by_row,
        "42 of 60 patients have images in several folds, e.g. IP_000: all images of a patient belong to one "
        "fold",
    ),
    _case(
        "1.2-off-by-one-folds", folds_from_one, "fold numbers run from 1 to 5: with 5 folds they are 0 to 4"
    ),
    _case(
        "1.2-ignores-n-folds", five_folds_always, "fold numbers run from 0 to 4: with 3 folds they are 0 to 2"
    ),
    _case(
        "1.2-one-per-patient-not-row",
        one_fold_per_patient,
        "one_fold_per_patient gave 60 fold numbers for 244 rows: one per row",
    ),
    _case("1.2-float-folds", folds_as_floats, "the fold numbers are float64: give whole numbers"),
    _case(
        "1.3-grouped-not-stratified",
        grouped_not_stratified,
        "fold 0 of 5 has a positive rate of 45.1% against 10.1% overall: each fold should be within 4 "
        "points of it",
    ),
    _case(
        "1.3-stratified-rows-not-patients",
        stratified_by_row,
        "100 of 100 patients have images in several folds, e.g. IP_000: all images of a patient belong to "
        "one fold",
    ),
    _case(
        "1.3-sorted-deck-cut-not-dealt",
        sorted_deck_cut_in_blocks,
        "fold 0 of 5 has a positive rate of 45.1% against 10.1% overall: each fold should be within 4 "
        "points of it",
    ),
    _case(
        "1.3-greedy-ignores-negatives",
        greedy_on_positives_only,
        "the folds hold 16 to 337 images: make them similar in size (the largest at most twice the smallest)",
    ),
    _case(
        "1.3-fold-zero-dealt-three-per-round",
        dealt_three_to_fold_zero,
        "the folds hold 49 to 187 images: make them similar in size (the largest at most twice the smallest)",
    ),
    _case(
        "2.1-draws-in-transform",
        MicroscopeDrawsPerInput,
        "two images in one call got different circles: draw the circle in make_params, once per call",
    ),
    _case(
        "2.1-ignores-p",
        MicroscopeAlways,
        "with p=0 the image changed: apply the microscope with probability p",
    ),
    _case(
        "2.1-plain-tensor-out",
        MicroscopeUnwrapped,
        "an Image went in and a plain tensor came out: wrap the result like its input (tv_tensors.wrap)",
    ),
    _case(
        "2.1-inside-blacked-out",
        MicroscopeInverted,
        "the centre of the image changed: keep what is inside the circle",
    ),
    _case(
        "2.1-one-size-always",
        MicroscopeFixedSize,
        "every call drew the same circle: draw its size at random, once per call",
    ),
    _case(
        "2.1-float-mask", MicroscopeFloatMask, "the image came back as torch.float32: keep its dtype, uint8"
    ),
    _case(
        "2.1-plain-module",
        MicroscopeModule,
        "Microscope is not a v2.Transform: subclass it, so that a pipeline holds it and labels pass through",
    ),
    _case("2.2-seed-plus-epoch", seeded_by_the_sum, "(seed 7, epoch 1) = (seed 8, epoch 0)"),
    _case(
        "2.2-seed-minus-epoch",
        seeded_by_the_difference,
        "(seed 0, epoch 0) and (seed 1, epoch 1) got the same order: every pair needs its own",
    ),
    _case("2.2-ignores-epoch", ignores_the_epoch, "epochs 0 and 1 got the same order"),
    _case("2.2-ignores-seed", ignores_the_seed, "seeds 7 and 8 got the same order"),
    _case("2.2-global-generator", global_generator, "the same seed and epoch gave two different orders"),
    _case("2.2-not-shuffled", not_shuffled, "the order is not shuffled"),
    _case("2.2-one-to-n", from_one_to_n, "epoch_order(50, ...) is not an order of 0..49"),
    _case(
        "2.4-keeps-the-file-mode",
        KeepsTheFileMode,
        "the grayscale file gave an image of shape (6, 5): convert every image to RGB, (6, 5, 3)",
    ),
    _case("2.4-integer-target", IntegerTarget, "the target's dtype is torch.int64: the loss wants float32"),
    _case(
        "2.4-scalar-target",
        ScalarTarget,
        "the target's shape is (): make it [1], like the model's output for one image",
    ),
    _case(
        "2.4-augments-before-converting",
        AugmentsBeforeConverting,
        "the augmentations got an image of shape (6, 5): convert to RGB before augmenting",
    ),
    _case(
        "2.4-no-augmentations",
        NoAugmentations,
        "the augmentations were never called: apply them to the image",
    ),
    _case("2.4-image-only", ImageOnly, "dataset[0] is a ndarray: return a pair (image, target)"),
    _case("2.3-only-mode-L", only_grayscale, "found 2 of the 3 images that are not RGB"),
    _case("2.3-inverted-condition", inverted_condition, "an RGB image was reported: only other modes count"),
    _case("2.3-converted-before-asking", converted_first, "found 0 of the 3 images that are not RGB"),
    _case("2.3-array-ndim-misses-rgba", by_array_dimensions, "found 2 of the 3 images that are not RGB"),
    _case(
        "2.3-array-shape-decodes-pixels",
        by_array_shape,
        "find_not_rgb decoded the pixels of 5 images: the mode is in the header, read it alone",
    ),
    _case(
        "3.1-2020-broadcast-bug",
        focal_2020,
        "every image got the batch's mean class weight (an N x N product): give the weights the loss's shape",
    ),
    _case("3.1-alpha-swapped", focal_alpha_swapped, "positives should weigh 1 - alpha, negatives alpha"),
    _case("3.1-summed-not-averaged", focal_summed, "the loss is summed over the batch: take the mean"),
    _case(
        "3.1-no-focusing-term", focal_without_gamma, "gamma is ignored: scale each BCE by (1 - p_t) ** gamma"
    ),
    _case("3.1-alpha-hardcoded", focal_constant_alpha, "focal_loss is wrong with alpha=0.5, gamma=0.0"),
    _case(
        "3.1-p-of-positive-not-true-class",
        focal_p_of_positive,
        "focal_loss differs from the formula with alpha=0.25, gamma=2",
    ),
    _case(
        "3.2-mean-of-batches",
        auc_mean_of_batches,
        "0.9801 is the mean of the batches' AUCs: the fold's AUC ranks all its images at once",
    ),
    _case(
        "3.2-training-mode",
        auc_in_training_mode,
        "fold_auc gave 0.7012, not 0.9131: the model was in training mode, so dropout changed its "
        "predictions",
    ),
    _case(
        "3.2-autograd-on",
        auc_with_autograd,
        "autograd recorded the predictions: predict under torch.no_grad()",
    ),
    _case("3.2-auc-of-0-1-decisions", auc_of_decisions, "fold_auc gave 0.5703, the fold's AUC is 0.9131"),
    _case("3.2-tensor-returned", auc_as_tensor, "fold_auc returned a Tensor: return the AUC as a float"),
    _case("3.2-first-batch-only", auc_of_first_batch, "fold_auc gave 0.9667, the fold's AUC is 0.9131"),
    _case(
        "3.3-equal-counts-as-gain",
        equal_auc_improves,
        "an AUC equal to the best so far is not an improvement",
    ),
    _case(
        "3.3-stops-one-epoch-late",
        stops_one_epoch_late,
        "training went on after 3 epochs without a gain with patience 3",
    ),
    _case(
        "3.3-count-never-resets",
        count_never_resets,
        "the count of epochs without a gain should start again when the AUC improves",
    ),
    _case(
        "3.3-compares-with-last-epoch",
        compares_with_last_epoch,
        "training went on after 3 epochs without a gain with patience 3",
    ),
    _case(
        "3.3-returns-index-not-count",
        returns_the_epoch_index,
        "training stopped after 2 epochs without a gain: patience 3 allows 3",
    ),
    _case(
        "3.4-mean-of-batch-means",
        mean_of_batch_means,
        "you averaged the batches' means: the last batch, of 2, weighs as much as one of 4; weigh each by "
        "its size",
    ),
    _case(
        "3.4-no-division",
        sum_of_batch_means,
        "the batches' losses are summed: divide by the number of examples",
    ),
    _case(
        "3.4-divided-by-full-batches",
        divided_by_full_batches,
        "the result is not the mean of the loss over all 10 examples",
    ),
    _case(
        "3.4-calls-backward",
        backward_while_measuring,
        "loss_per_image called backward: measuring a loss needs no gradients",
    ),
    _case(
        "3.4-measured-while-autograd-records",
        measured_while_recording,
        "the model ran while autograd recorded: measure the loss under torch.no_grad()",
    ),
    _case(
        "3.5-never-zeroes-the-gradients",
        never_zeroes_the_gradients,
        "after the epoch the weights differ from one step per batch on that batch's gradient: clear the "
        "gradients at every step (optimizer.zero_grad())",
    ),
    _case(
        "3.5-stays-in-eval-mode",
        stays_in_eval_mode,
        "the model is still in eval mode: call model.train() first",
    ),
    _case(
        "3.5-mean-of-the-batch-means",
        mean_of_the_batch_means,
        "train_epoch returned 1.2706, the mean loss per image was 1.1727: "
        "weigh each batch's loss by its size",
    ),
    _case(
        "3.5-one-step-for-the-epoch",
        one_step_for_the_epoch,
        "the optimizer stepped 1 times for 3 batches: one step per batch",
    ),
    _case("4.1-plain-bce", LitPlainBce, "the loss is plain BCE: use the module's focal loss, self.loss_fn"),
    _case(
        "4.1-calls-backward",
        LitCallsBackward,
        "training_step called backward: only return the loss, the Trainer calls backward, step and zero_grad",
    ),
    _case("4.1-returns-item", LitReturnsItem, "training_step returned a float: return the loss tensor"),
    _case(
        "4.1-logs-per-step",
        LitLogsPerStep,
        "log train_loss with on_epoch=True, so that the Trainer averages it over the epoch",
    ),
    _case(
        "4.1-no-batch-size",
        LitLogsWithoutBatchSize,
        "log train_loss with batch_size=len(x), so that the epoch's mean is a mean per image",
    ),
    _case(
        "4.1-ignores-lr",
        LitFixedLr,
        "the optimizer's learning rate is 0.001: use the lr the module was made with",
    ),
    _case(
        "4.1-lr-typed-in",
        LitLrTypedIn,
        "the optimizer's learning rate is 0.01: use the lr the module was made with",
    ),
    _case(
        "4.1-logs-bce-returns-focal",
        LitLogsBceReturnsFocal,
        "the value logged as train_loss is not the loss training_step returns",
    ),
    _case("4.1-sgd-not-adam", LitSgd, "use Adam, as chapter 03's engine does"),
    _case(
        "4.2-shuffles-validation",
        FoldShufflesValidation,
        "the validation loader shuffles: keep the table's order",
    ),
    _case("4.2-never-shuffles", FoldNeverShuffles, "the training loader keeps the table's order: shuffle it"),
    _case("4.2-mask-inverted", FoldTrainsOnTheFold, "an example of fold 1 is in the training loader"),
    _case("4.2-ignores-fold", FoldAlwaysZero, "an example of fold 1 is in the training loader"),
    _case(
        "4.2-trains-on-everything", FoldTrainsOnEverything, "an example of fold 1 is in the training loader"
    ),
    _case(
        "4.2-ignores-batch-size",
        FoldDefaultBatchSize,
        "the training batches hold [1, 1, 1, 1, 1, 1, 1, 1, 1] examples: use batch_size",
    ),
    _case(
        "4.2-drops-last-batch",
        FoldDropsLast,
        "the training loader should hold each other fold's example once",
    ),
    _case(
        "4.2-shuffled-once-in-setup",
        FoldShuffledOnceInSetup,
        "the training loader gives every epoch the same order: shuffle each epoch (shuffle=True)",
    ),
    _case(
        "4.2-batch-size-typed-in",
        FoldBatchesOfFour,
        "the training batches hold [4, 4, 2] examples: use batch_size",
    ),
    _case(
        "4.3-keeps-tensors",
        RecorderKeepsTensors,
        "a row holds tensors: store plain numbers (float(v)), so that the history can be written as JSON",
    ),
    _case(
        "4.3-key-error-without-validation",
        RecorderExpectsValidation,
        "an epoch without validation raised KeyError 'valid_auc': record valid_auc as NaN instead",
    ),
    _case(
        "4.3-reads-last-step",
        RecorderReadsLastStep,
        "train_loss should be the epoch's value logged as 'train_loss'",
    ),
    _case(
        "4.3-keeps-every-metric",
        RecorderKeepsEverything,
        "a row's keys are ['epoch', 'train_loss', 'train_loss_epoch', 'train_loss_step', 'valid_auc', "
        "'valid_loss']: a row holds epoch, train_loss and valid_auc",
    ),
    _case(
        "4.3-zero-not-nan",
        RecorderZeroWithoutValidation,
        "an epoch without validation should record valid_auc as NaN",
    ),
    _case("4.3-epoch-from-row-count", RecorderCountsItsRows, "epoch should be the Trainer's current_epoch"),
    _case(
        "4.3-wrong-hook", RecorderOnValidationEnd, "after one epoch there are 0 rows: append one per epoch"
    ),
    _case("4.3-not-a-callback", RecorderNotACallback, "EpochRecorder should be a Lightning Callback"),
    _case(
        "5.1-finfo-tiny",
        smallest_normal,
        "smallest_positive(float16) is the smallest normal number: subnormals go further down",
    ),
    _case(
        "5.1-finfo-eps",
        machine_epsilon,
        "smallest_positive(float16) is eps, the gap above 1.0, not the smallest number",
    ),
    _case(
        "5.1-ignores-dtype",
        halved_in_python_floats,
        "smallest_positive(float16) = 4.941e-324 is not a number float16 can hold exactly",
    ),
    _case(
        "5.1-halved-once-too-often",
        halved_once_too_often,
        "smallest_positive(float16) is 0.0: the answer is a positive number",
    ),
    _case(
        "5.1-fp16-for-every-format",
        fp16_for_every_format,
        "smallest_positive(bfloat16) = 5.960e-08: bfloat16 holds smaller positive numbers",
    ),
    _case("5.1-table-typed-in", table_typed_in, "your code raised KeyError: torch.float64"),
    _case(
        "5.2-grows-one-step-late",
        grows_one_step_late,
        "the 2000th clean step in a row should double the scale",
    ),
    _case(
        "5.2-inf-keeps-count",
        inf_keeps_the_count,
        "after an inf gradient the count of clean steps should start again from 0",
    ),
    _case(
        "5.2-growth-keeps-count",
        growth_keeps_the_count,
        "after the scale grows, counting starts again from 0",
    ),
    _case(
        "5.2-ignores-growth-interval",
        interval_of_2000_always,
        "with growth_interval=3, step 3 gave (65536.0, 3), not (131072.0, 0)",
    ),
    _case(
        "5.2-grows-every-step",
        grows_every_clean_step,
        "a clean step that is not the 2000th should only count",
    ),
    _case(
        "5.3-no-autocast",
        step_without_autocast,
        "the forward pass ran in float32: it should run under autocast",
    ),
    _case(
        "5.3-ignores-dtype",
        step_in_fp16_always,
        "the forward pass ran in torch.float16, not in the dtype asked for",
    ),
    _case(
        "5.3-bf16-always",
        step_in_bf16_always,
        "the forward pass ran in torch.bfloat16, not in the dtype asked for",
    ),
    _case(
        "5.3-ignores-scaler",
        step_ignores_the_scaler,
        "the loss never went through the scaler before backward",
    ),
    _case(
        "5.3-steps-around-scaler",
        step_around_the_scaler,
        "the scaler was updated, but the optimizer did not step through it",
    ),
    _case(
        "5.3-never-zero-grad",
        step_never_zeroes,
        "two steps differ from two fp32 steps: did the first step's gradients stay in .grad?",
    ),
    _case(
        "5.3-never-updates-scaler", step_never_updates, "the scaler never updated its scale after the step"
    ),
    _case(
        "5.3-scaled-twice",
        step_scaled_twice,
        "the step moved the weights 1025 times as far as an fp32 step: the gradients were still scaled",
    ),
    _case(
        "5.4-clips-before-unscaling",
        clip_before_unscaling,
        "the norm you clipped is 1025 times the gradients' norm: it was measured on the scaled gradients",
    ),
    _case(
        "5.4-unscales-after-clipping",
        unscale_after_clipping,
        "the norm you returned is far below the gradients' norm: clip after unscale_, not before",
    ),
    _case(
        "5.4-never-clips",
        never_clips,
        "the step moved the weights as far as an unclipped step: clip them to max_norm",
    ),
    _case(
        "5.4-returns-the-clipped-norm",
        returns_the_clipped_norm,
        "clipped_step should return the gradients' norm before clipping",
    ),
    _case(
        "5.4-never-updates-scaler",
        clipped_step_never_updates,
        "the scaler never updated its scale after the step",
    ),
]

RIGHT = [
    _right("1.1-crosstab", malignant_by_crosstab),
    _right("1.1-value-counts-reindexed", malignant_by_value_counts),
    _right("1.2-sklearn-group-k-fold", group_k_fold),
    _right("1.2-sorted-ids-dealt-as-series", sorted_patients_dealt),
    _right("1.3-sklearn-stratified-group-k-fold", stratified_group_k_fold),
    _right("1.3-greedy-positives-then-images", greedy_positives_then_images),
    _right("2.1-python-random-and-where", MicroscopeWhere),
    _right("2.2-numpy-seed-sequence", numpy_seed_sequence),
    _right("2.2-python-random-string-seed", python_random_string_seed),
    _right("2.3-filter-over-header-modes", not_rgb_with_filter),
    _right("2.4-through-the-courses-helpers", ThroughTheCoursesHelpers),
    _right("3.1-log-sigmoid-of-signed-logit", focal_from_log_sigmoid),
    _right("3.1-torchvision-sigmoid-focal-loss", focal_by_torchvision),
    _right("3.2-torchmetrics-on-probabilities", auc_by_torchmetrics_of_probabilities),
    _right("3.3-epochs-since-best-epoch", epochs_since_best_epoch),
    _right("3.4-one-loss-over-all-predictions", loss_of_all_predictions),
    _right("3.4-running-mean", running_mean),
    _right("3.5-zeroes-first-and-sums-tensors", zeroes_first_and_sums_tensors),
    _right("4.1-net-parameters-dict-optimizer-step-and-epoch-log", LitOtherwise),
    _right("4.2-subsets-and-random-sampler", FoldBySubsets),
    _right("4.3-item-and-membership-test", RecorderWithItem),
    _right("5.1-nextafter-zero", next_after_zero),
    _right("5.1-lowest-bit-pattern", lowest_bit_set),
    _right("5.2-modulo-count", scale_by_modulo),
    _right("5.2-gradscaler-kernel", scale_by_gradscaler_kernel),
    _right("5.3-zero-grad-after-the-step", step_zeroes_at_the_end),
    _right("5.4-clips-by-hand", clips_by_hand),
]


@pytest.mark.parametrize("number, answer, message", WRONG)
def test_a_typical_mistake_gets_a_cross_that_names_it(number, answer, message):
    assert verdict(number, answer) == (False, f"✗ Exercise {number}: {message}")


@pytest.mark.parametrize("number, answer", RIGHT)
def test_a_right_answer_unlike_the_solution_passes(number, answer):
    assert verdict(number, answer) == (True, f"✓ Exercise {number}: right")


def test_every_exercise_of_chapters_01_to_05_has_mistakes_and_another_right_answer():
    numbers = sorted(n for n in registered() if n.split(".")[0] in CHAPTERS)
    wrong, right = Counter(p.values[0] for p in WRONG), Counter(p.values[0] for p in RIGHT)
    assert sorted(set(wrong) | set(right)) == numbers
    assert [n for n in numbers if wrong[n] < 2 or right[n] < 1] == []
