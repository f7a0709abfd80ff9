{{ config(materialized='view') }}
select id, customer_id, amount from {{ ref('orders') }} where amount > 10
