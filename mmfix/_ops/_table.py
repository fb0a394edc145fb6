"""Every function of mmcv's compiled extension, and the family module that implements it.

One row per name (mmcv 2.1.0 and 2.2.0 load the same 112). The value is the op family:
the module of ``mmfix._ops`` whose function of the same name implements it. A family
without a module (``sparse_conv``) or a module without the function is unavailable;
``UNAVAILABLE_HINTS`` then says what to use instead.
"""

from __future__ import annotations

EXT_FUNCTIONS: dict[str, str] = {
    # boxes
    "nms": "nms",
    "softnms": "nms",
    "nms_match": "nms",
    "bbox_overlaps": "bbox",
    # RoI pooling
    "roi_align_forward": "roi_align",
    "roi_align_backward": "roi_align",
    "roi_pool_forward": "roi_pool",
    "roi_pool_backward": "roi_pool",
    "deform_roi_pool_forward": "deform_roi_pool",
    "deform_roi_pool_backward": "deform_roi_pool",
    "prroi_pool_forward": "prroi_pool",
    "prroi_pool_backward": "prroi_pool",
    "prroi_pool_coor_backward": "prroi_pool",
    "roi_align_rotated_forward": "roi_align_rotated",
    "roi_align_rotated_backward": "roi_align_rotated",
    "riroi_align_rotated_forward": "riroi_align_rotated",
    "riroi_align_rotated_backward": "riroi_align_rotated",
    "bezier_align_forward": "bezier_align",
    "bezier_align_backward": "bezier_align",
    "border_align_forward": "border_align",
    "border_align_backward": "border_align",
    # convolutions
    "deform_conv_forward": "deform_conv",
    "deform_conv_backward_input": "deform_conv",
    "deform_conv_backward_parameters": "deform_conv",
    "modulated_deform_conv_forward": "modulated_deform_conv",
    "modulated_deform_conv_backward": "modulated_deform_conv",
    "masked_im2col_forward": "masked_conv",
    "masked_col2im_forward": "masked_conv",
    "carafe_forward": "carafe",
    "carafe_backward": "carafe",
    "carafe_naive_forward": "carafe",
    "carafe_naive_backward": "carafe",
    "correlation_forward": "correlation",
    "correlation_backward": "correlation",
    "active_rotated_filter_forward": "active_rotated_filter",
    "active_rotated_filter_backward": "active_rotated_filter",
    "rotated_feature_align_forward": "rotated_feature_align",
    "rotated_feature_align_backward": "rotated_feature_align",
    # losses, attention, normalisation
    "sigmoid_focal_loss_forward": "focal_loss",
    "sigmoid_focal_loss_backward": "focal_loss",
    "softmax_focal_loss_forward": "focal_loss",
    "softmax_focal_loss_backward": "focal_loss",
    "ms_deform_attn_forward": "multi_scale_deform_attn",
    "ms_deform_attn_backward": "multi_scale_deform_attn",
    "sync_bn_forward_mean": "sync_bn",
    "sync_bn_forward_var": "sync_bn",
    "sync_bn_forward_output": "sync_bn",
    "sync_bn_backward_param": "sync_bn",
    "sync_bn_backward_data": "sync_bn",
    "psamask_forward": "psamask",
    "psamask_backward": "psamask",
    "tin_shift_forward": "tin_shift",
    "tin_shift_backward": "tin_shift",
    # generative models (StyleGAN family)
    "upfirdn2d": "upfirdn2d",
    "fused_bias_leakyrelu": "fused_bias_leakyrelu",
    "bias_act": "bias_act",
    "filtered_lrelu": "filtered_lrelu",
    "filtered_lrelu_act_": "filtered_lrelu",
    # rotated and quadrilateral boxes, polygons
    "box_iou_rotated": "box_iou_rotated",
    "nms_rotated": "nms_rotated",
    "box_iou_quadri": "box_iou_quadri",
    "nms_quadri": "nms_quadri",
    "convex_iou": "convex_iou",
    "convex_giou": "convex_iou",
    "min_area_polygons": "min_area_polygons",
    "points_in_polygons_forward": "points_in_polygons",
    "diff_iou_rotated_sort_vertices_forward": "diff_iou_rotated",
    # text detection (MMOCR)
    "contour_expand": "contour_expand",
    "pixel_group": "pixel_group",
    # 3D: points and voxels
    "hard_voxelize_forward": "voxelize",
    "dynamic_voxelize_forward": "voxelize",
    "dynamic_point_to_voxel_forward": "scatter_points",
    "dynamic_point_to_voxel_backward": "scatter_points",
    "points_in_boxes_part_forward": "points_in_boxes",
    "points_in_boxes_all_forward": "points_in_boxes",
    "points_in_boxes_cpu_forward": "points_in_boxes",
    "iou3d_boxes_overlap_bev_forward": "iou3d",
    "iou3d_nms3d_forward": "iou3d",
    "iou3d_nms3d_normal_forward": "iou3d",
    "furthest_point_sampling_forward": "furthest_point_sample",
    "furthest_point_sampling_with_dist_forward": "furthest_point_sample",
    "ball_query_forward": "ball_query",
    "stack_ball_query_forward": "ball_query",
    "group_points_forward": "group_points",
    "group_points_backward": "group_points",
    "stack_group_points_forward": "group_points",
    "stack_group_points_backward": "group_points",
    "gather_points_forward": "gather_points",
    "gather_points_backward": "gather_points",
    "three_nn_forward": "three_nn",
    "three_interpolate_forward": "three_interpolate",
    "three_interpolate_backward": "three_interpolate",
    "knn_forward": "knn",
    "roiaware_pool3d_forward": "roiaware_pool3d",
    "roiaware_pool3d_backward": "roiaware_pool3d",
    "roipoint_pool3d_forward": "roipoint_pool3d",
    "assign_score_withk_forward": "assign_score_withk",
    "assign_score_withk_backward": "assign_score_withk",
    "chamfer_distance_forward": "chamfer_distance",
    "chamfer_distance_backward": "chamfer_distance",
    # 3D: sparse convolution (spconv's algorithm; mmcv's own copy of it)
    "get_indice_pairs_2d_forward": "sparse_conv",
    "get_indice_pairs_3d_forward": "sparse_conv",
    "get_indice_pairs_4d_forward": "sparse_conv",
    "get_indice_pairs_2d_backward": "sparse_conv",
    "get_indice_pairs_3d_backward": "sparse_conv",
    "indice_conv_forward": "sparse_conv",
    "indice_conv_backward": "sparse_conv",
    "fused_indice_conv_forward": "sparse_conv",
    "indice_maxpool_forward": "sparse_conv",
    "indice_maxpool_backward": "sparse_conv",
    # build information
    "get_compiler_version": "_build_info",
    "get_compiling_cuda_version": "_build_info",
}

_SPARSE_HINT = (
    "Sparse convolution has no PyTorch implementation in mmfix. MMDetection3D can use spconv "
    "instead of mmcv's copy: `pip install spconv` (or spconv-cu1xx for your CUDA) and it is "
    "picked up automatically; torchsparse is the other option"
)

#: Extra advice for names without an implementation (by name prefix).
UNAVAILABLE_HINTS: dict[str, str] = {
    "get_indice_pairs": _SPARSE_HINT,
    "indice_": _SPARSE_HINT,
    "fused_indice_conv": _SPARSE_HINT,
}
