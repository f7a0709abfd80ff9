{{ config(materialized='table') }}
select customer_id, count(*) as orders from {{ ref('big_orders') }} group by customer_id
